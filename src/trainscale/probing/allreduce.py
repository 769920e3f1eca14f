"""All-reduce bandwidth and latency between N worker processes, and the alpha-beta fit.

The workers are started by the project's elastic launcher, as a run's are, and join a
process group: gloo on the CPU, NCCL on GPUs (one GPU per worker). For each message size
they all-reduce a float32 tensor in timed batches; a batch's time per all-reduce is the
slowest rank's (taken with an all-reduce MAX), and the best batch of each size is kept.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from trainscale.metrics.comm import algorithm_bandwidth, bus_bandwidth, fit_alpha_beta
from trainscale.parallel import launcher
from trainscale.parallel.distenv import DistEnv, exit_with_parent
from trainscale.parallel.interrupts import exit_quietly_on_signals
from trainscale.parallel.loopback import pin_gloo_to_loopback
from trainscale.probing.options import BYTES_PER_ELEMENT


def _batch_size(size_bytes: int, target_bytes: int) -> int:
    # Small messages are timed in large batches (their time is mostly latency), big ones in
    # small batches (each already moves many bytes).
    return max(2, min(200, target_bytes // max(size_bytes, 1)))


@record  # writes a worker's exception to the launcher's error file, for the parent to report
def allreduce_worker(
    backend: str, sizes_bytes: Sequence[int], repeats: int, target_bytes: int, timeout_s: float
) -> list[dict[str, float]] | None:
    """One probe worker: time all-reduces of every size; rank 0 returns the rows."""
    exit_with_parent()
    exit_quietly_on_signals()
    pin_gloo_to_loopback()  # the probe's workers all run on this machine
    env = DistEnv.from_environ()
    # One intra-op thread: gloo has its own threads, and N workers x all cores each would
    # oversubscribe the machine and time the scheduler instead of the collective.
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=timeout_s)
    if backend == "nccl":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    try:
        rows = []
        for size in sizes_bytes:
            tensor = torch.ones(max(1, size // BYTES_PER_ELEMENT), device=device)
            batch = _batch_size(size, target_bytes)
            for _ in range(2):  # warm-up: connection set-up, buffer allocation
                dist.all_reduce(tensor)
            sync()
            best = float("inf")
            for _ in range(max(1, repeats)):
                dist.barrier()
                sync()
                t0 = time.perf_counter()
                for _ in range(batch):
                    dist.all_reduce(tensor)
                sync()
                elapsed = torch.tensor([(time.perf_counter() - t0) / batch], device=device)
                # The collective is done when its slowest rank is.
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
                best = min(best, float(elapsed.item()))
            rows.append({"size_bytes": tensor.numel() * BYTES_PER_ELEMENT, "time_s": best})
        return rows if env.is_main else None
    finally:
        dist.destroy_process_group()


def summarise_allreduce(rows: Sequence[dict[str, float]], workers: int) -> dict[str, Any]:
    """Bandwidths per size and the alpha-beta fit, from rank 0's rows."""
    points = []
    for row in rows:
        size, seconds = row["size_bytes"], row["time_s"]
        points.append(
            {
                "size_bytes": size,
                "time_s": seconds,
                "algbw_bytes_per_s": algorithm_bandwidth(size, seconds),
                "busbw_bytes_per_s": bus_bandwidth(size, seconds, workers),
            }
        )
    fit = fit_alpha_beta([p["size_bytes"] for p in points], [p["time_s"] for p in points])
    return {
        "workers": workers,
        "points": points,
        "fit": fit.to_dict(),
        "alpha_s": fit.alpha_s,
        "beta_s_per_byte": fit.beta_s_per_byte,
        "best_busbw_bytes_per_s": max(p["busbw_bytes_per_s"] for p in points),
    }


def measure_allreduce(
    workers: int,
    backend: str,
    sizes_bytes: Sequence[int],
    repeats: int,
    target_bytes: int,
    timeout_s: float,
) -> dict[str, Any]:
    """Launch `workers` processes, time all-reduces, fit alpha-beta; raises WorkersFailed."""
    returned = launcher.launch_workers(
        allreduce_worker, (backend, list(sizes_bytes), repeats, target_bytes, timeout_s), workers
    )
    rows = returned.get(0)
    if not rows:
        raise RuntimeError("the all-reduce probe's rank 0 returned no measurements")
    result = summarise_allreduce(rows, workers)
    result.update(
        {"backend": backend, "repeats": repeats, "sizes_bytes": [r["size_bytes"] for r in rows]}
    )
    return result
