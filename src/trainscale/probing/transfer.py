"""Host-to-device and device-to-host copy bandwidth (CUDA, pinned host memory), best of N.

Pinned (page-locked) host memory is what a training loop that streams batches should use,
and the only kind the GPU's copy engines read at full speed; pageable copies go through a
staging buffer and say more about the host's memory than about the link.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def _best_copy_s(dst: torch.Tensor, src: torch.Tensor, repeats: int) -> float:
    """Best seconds of one copy, timed with CUDA events on the current stream."""
    dst.copy_(src, non_blocking=True)  # warm-up: first-touch and driver set-up
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def measure_transfer(
    device: torch.device, sizes_bytes: Sequence[int], repeats: int
) -> dict[str, Any]:
    """Bytes per second host->device ('h2d') and device->host ('d2h') for each size."""
    directions: dict[str, list[dict[str, float]]] = {"h2d": [], "d2h": []}
    with torch.cuda.device(device):
        for size in sizes_bytes:
            host = torch.empty(size, dtype=torch.uint8).pin_memory()
            gpu = torch.empty(size, dtype=torch.uint8, device=device)
            for name, (dst, src) in (("h2d", (gpu, host)), ("d2h", (host, gpu))):
                seconds = _best_copy_s(dst, src, repeats)
                directions[name].append(
                    {"size_bytes": size, "seconds": seconds, "bytes_per_s": size / seconds}
                )
            del host, gpu
    result: dict[str, Any] = {"sizes_bytes": list(sizes_bytes), "repeats": repeats}
    for name, rows in directions.items():
        result[name] = {
            "best_bytes_per_s": max(row["bytes_per_s"] for row in rows),
            "by_size": rows,
        }
    return result
