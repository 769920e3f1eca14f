"""Step clocks: perf_counter on the CPU, CUDA events on a GPU, read only at boundaries.

On the CPU every operation is synchronous, so `time.perf_counter()` around a step measures
the step. On a GPU the host runs ahead of the device: a host clock would measure how fast
kernels are *queued*. A CUDA event pair measures the device's own time, and reading it
needs a synchronisation, which would stall the pipeline if done every step. So the clock
records marks during the steps and resolves them only at measurement boundaries
(evaluation, epoch end), where the trainer synchronises anyway.

The loop takes one mark per step boundary (a step's end mark is the next step's start), so
the step times add up to the whole training span between evaluations: on a GPU a pair of
events per step would leave out the host's time between steps whenever the device idles
through it, flattering launch-bound runs.
"""

from __future__ import annotations

import time
from typing import Any

import torch


class StepClock:
    """Host clock (CPU training): marks are perf_counter readings."""

    def mark(self) -> Any:
        """A point in time on the training stream."""
        return time.perf_counter()

    def seconds(self, start: Any, end: Any) -> float:
        """Seconds between two marks; only call after `settle()` for device clocks."""
        return end - start

    def settle(self) -> None:
        """Wait until every mark taken so far can be read (no-op on the host)."""


class CudaStepClock(StepClock):
    """Device clock (GPU training): marks are CUDA events on the current stream."""

    def mark(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1000.0

    def settle(self) -> None:
        torch.cuda.synchronize()


def make_clock(device: torch.device) -> StepClock:
    """The clock that measures work on `device`."""
    return CudaStepClock() if device.type == "cuda" else StepClock()


class StepTimes:
    """Per-step (start, end) marks, turned into seconds when the clock can be read.

    `pending()` gives the durations of the steps marked since the last call, after
    settling the clock: the trainer calls it at evaluation points and epoch ends.
    """

    def __init__(self, clock: StepClock):
        self.clock = clock
        self._marks: list[tuple[Any, Any]] = []
        self.seconds: list[float] = []
        """Every resolved step time, in step order."""

    def add(self, start: Any, end: Any) -> None:
        self._marks.append((start, end))

    def pending(self) -> list[float]:
        if not self._marks:
            return []
        self.clock.settle()
        new = [self.clock.seconds(start, end) for start, end in self._marks]
        self._marks.clear()
        self.seconds.extend(new)
        return new
