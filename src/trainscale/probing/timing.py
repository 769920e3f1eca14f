"""The probes' clock: the best of timed batches of calls, a GPU synchronised at each batch's
ends only (so that work queues as it does in training)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def sync(device: torch.device) -> None:
    """Wait for `device`'s queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_seconds_per_call(
    call: Callable[[], object],
    device: torch.device,
    repeats: int,
    min_batch_s: float,
    budget_s: float,
    max_per_batch: int = 1000,
) -> float:
    """Best seconds per `call()` over up to `repeats` timed batches (`call` warmed up already).

    A batch holds enough calls (up to `max_per_batch`) to last `min_batch_s`, so the clock's
    resolution and the sync do not matter. Fewer batches are timed when `repeats` of them
    would exceed `budget_s` (at least one), so that a slow path cannot stall the probe. The
    best batch is kept: interference only ever slows a measurement down.
    """
    sync(device)
    t0 = time.perf_counter()
    call()
    sync(device)
    one = max(time.perf_counter() - t0, 1e-9)
    per_batch = max(1, min(max_per_batch, int(min_batch_s / one)))
    batches = max(1, min(repeats, int(budget_s / (one * per_batch))))
    best = float("inf")
    for _ in range(batches):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(per_batch):
            call()
        sync(device)
        best = min(best, (time.perf_counter() - t0) / per_batch)
    return best
