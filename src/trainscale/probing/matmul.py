"""Achievable matmul FLOP/s: square matrix products of a few sizes, best of N.

A matmul of two n x n matrices does 2 n^3 FLOPs (n^3 multiply-adds). Each size is warmed up
(thread pools, allocator, kernel selection) and then timed in batches long enough for the
clock; the best batch of each size is kept, because interference only ever slows a
measurement down. The best size's figure is the machine's achievable peak at that precision.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from trainscale.probing.timing import best_seconds_per_call

_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def matmul_flops(n: int) -> int:
    """FLOPs of one n x n by n x n product."""
    return 2 * n * n * n


@contextmanager
def _tf32(device: torch.device, enabled: bool) -> Iterator[None]:
    """Allow or forbid TF32 tensor cores for fp32 matmuls; restore the setting afterwards."""
    if device.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def time_matmul(
    n: int,
    dtype: torch.dtype,
    device: torch.device,
    repeats: int,
    min_batch_s: float = 0.05,
    budget_s: float = 30.0,
) -> float:
    """Best seconds per n x n matmul over up to `repeats` timed batches.

    Fewer batches are timed when `repeats` of them would exceed `budget_s` (at least one),
    so that a slow path (bf16 emulated on a CPU without bf16 units) cannot stall the probe.
    """
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    torch.matmul(a, b, out=out)  # warm-up: thread pool, allocator, kernel selection
    return best_seconds_per_call(
        lambda: torch.matmul(a, b, out=out), device, repeats, min_batch_s, budget_s
    )


def measure_matmul(
    device: torch.device,
    precisions: Sequence[str],
    sizes: Sequence[int],
    repeats: int,
    min_batch_s: float = 0.05,
    budget_s: float = 30.0,
) -> dict[str, Any]:
    """Best FLOP/s per precision over `sizes`, with every size's figure.

    Sizes go from small to large; a size whose single matmul would take more than half of
    `budget_s` (predicted from the last size by n^3) is skipped and says so.
    Returns {"precisions": {p: {"best_flops_per_s", "best_size", "by_size": [...]}}}.
    """
    results: dict[str, Any] = {}
    for precision in precisions:
        by_size: list[dict[str, Any]] = []
        last: tuple[int, float] | None = None
        with _tf32(device, precision == "tf32"):
            for n in sorted(sizes):
                if last is not None:
                    predicted = last[1] * (n / last[0]) ** 3
                    if predicted > budget_s / 2:
                        by_size.append(
                            {"n": n, "skipped": f"one matmul would take about {predicted:.0f} s"}
                        )
                        continue
                seconds = time_matmul(n, _DTYPES[precision], device, repeats, min_batch_s, budget_s)
                last = (n, seconds)
                by_size.append(
                    {
                        "n": n,
                        "seconds_per_matmul": seconds,
                        "flops_per_s": matmul_flops(n) / seconds,
                    }
                )
        measured = [row for row in by_size if "flops_per_s" in row]
        best = max(measured, key=lambda row: row["flops_per_s"])
        results[precision] = {
            "best_flops_per_s": best["flops_per_s"],
            "best_size": best["n"],
            "by_size": by_size,
        }
    return {"precisions": results, "sizes": sorted(sizes), "repeats": repeats}
