"""One synchronous data-parallel step, as DDP runs it. Pure numpy, no I/O.

A worker slices its batch (data), runs forward, then backward. Backward produces gradients
bucket by bucket in reverse layer order; bucket k is ready once the backward compute up to
its last gradient is done. Its all-reduce starts when it is ready on every worker and the
communication channel is free: one channel, buckets in order, as DDP's reducer launches
them. Backward returns when the last all-reduce is done; then the optimizer steps.

    ready_k = f (data + forward + backward x share_k)
    end_k   = max(ready_k, end_{k-1}) + comm_k
    sync    = max(end of backward compute, end_K)
    step    = sync + f optimizer

f is the slowest worker's compute-time factor (see `stragglers`): every phase of every
worker scales with its own factor, and a bucket is ready on all workers when it is ready on
the slowest, so the step follows the slowest worker's timeline.

Exposed communication is the time the step waits for communication after backward compute
is done: sync - f (data + forward + backward).

Overlap. On GPUs the all-reduce runs on its own stream beside backward (overlap = 1). On
CPU workers whose cores all compute, gloo's threads take their cycles from backward, so
communication adds to the step (overlap = 0). In between, the step is the mix
overlap x (overlapped step) + (1 - overlap) x (serialised step).

Because the event order is fixed (buckets in order on one channel), the event simulation is
this recurrence; numpy runs it for all Monte Carlo samples at once, so no discrete-event
library is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepCosts:
    """The nominal (median-worker) costs of one step of one worker, in seconds."""

    data_s: float
    forward_s: float
    backward_s: float
    optimizer_s: float
    bucket_ready_shares: tuple[float, ...] = ()
    """Per bucket, in backward order: share of backward compute done when it is ready."""
    bucket_comm_s: tuple[float, ...] = ()
    """Per bucket: its all-reduce time."""
    overlap: float = 1.0

    def __post_init__(self) -> None:
        for name in ("data_s", "forward_s", "backward_s", "optimizer_s"):
            value = getattr(self, name)
            if not (value >= 0 and np.isfinite(value)):
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if len(self.bucket_ready_shares) != len(self.bucket_comm_s):
            raise ValueError("every bucket needs a ready share and a communication time")
        if any(s < 0 or s > 1 for s in self.bucket_ready_shares):
            raise ValueError("bucket ready shares must lie in [0, 1]")
        if any(not (t >= 0) for t in self.bucket_comm_s):
            raise ValueError("bucket communication times must be >= 0")
        if not 0 <= self.overlap <= 1:
            raise ValueError(f"overlap must lie in [0, 1], not {self.overlap!r}")

    @property
    def compute_s(self) -> float:
        """Data, forward and backward: the work before the gradients are all computed."""
        return self.data_s + self.forward_s + self.backward_s

    @property
    def comm_s(self) -> float:
        """Every bucket's all-reduce, end to end, as if nothing overlapped."""
        return float(sum(self.bucket_comm_s))


@dataclass(frozen=True)
class StepSamples:
    """One step per Monte Carlo sample (arrays of equal length)."""

    step_s: np.ndarray
    compute_s: np.ndarray
    """Data + forward + backward of the slowest worker."""
    exposed_comm_s: np.ndarray
    optimizer_s: np.ndarray


def simulate_step(costs: StepCosts, slowest_factor: Sequence[float] | np.ndarray) -> StepSamples:
    """The step time for each sampled slowest-worker factor (see the module doc)."""
    f = np.asarray(slowest_factor, dtype=float)
    if f.ndim != 1 or f.size == 0 or np.any(f <= 0):
        raise ValueError("slowest-worker factors must be a non-empty 1-d array of positives")
    before_backward = f * (costs.data_s + costs.forward_s)
    compute_end = f * costs.compute_s
    channel_free = np.zeros_like(f)
    for share, comm in zip(costs.bucket_ready_shares, costs.bucket_comm_s, strict=True):
        ready = before_backward + f * costs.backward_s * share
        channel_free = np.maximum(ready, channel_free) + comm
    overlapped = np.maximum(compute_end, channel_free)
    serialised = compute_end + costs.comm_s
    sync = costs.overlap * overlapped + (1.0 - costs.overlap) * serialised
    optimizer = f * costs.optimizer_s
    return StepSamples(
        step_s=sync + optimizer,
        compute_s=compute_end,
        exposed_comm_s=sync - compute_end,
        optimizer_s=optimizer,
    )
