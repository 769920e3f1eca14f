"""The meter a user's own training script wraps its steps in (`trainscale.meter()`).

A script run (runner/script_worker.py) activates one `StepMeter` in each worker before it
runs the script; the script's `trainscale.meter()` then returns it. Outside trainscale
(plain `python train.py`, or `torchrun train.py`) nothing is active and `meter()` returns a
`NullMeter`, whose `step()` and `evaluate()` do nothing: the script trains exactly as it
would without the two lines, at the cost of one no-op context manager per step.

What a step is, by the loop's rule (train/timing.py): one mark per step boundary, a step's
end being the next step's start, so the step times add up to the training clock. The time
from one step's end to the next step's start is what the script spent fetching its next
batch (its DataLoader): the step's data wait, part of its step time and also kept apart.
`evaluate()` marks the time since the last step's end as evaluation, off the training clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class ScriptMeasurements:
    """One worker's raw measurements of a script run (seconds, steps in order)."""

    step_times_s: list[float] = field(default_factory=list)
    """Each step's time: its data wait plus the time inside `meter.step()`."""
    data_wait_s: list[float] = field(default_factory=list)
    """Each step's wait for its data (0 for the first step: no boundary precedes it)."""
    samples: list[int] = field(default_factory=list)
    """Samples this worker trained on in each step."""
    curve: list[tuple[float, int, float]] = field(default_factory=list)
    """(training clock s, steps done, accuracy) at each `evaluate()`."""
    last_loss: float | None = None
    """The loss the last `evaluate()` gave, if any."""
    eval_time_s: float = 0.0
    """Time from a step's end to the `evaluate()` that followed it, off the clock."""

    @property
    def train_clock_s(self) -> float:
        return sum(self.step_times_s)


class StepMeter:
    """The meter of a script run under trainscale: times steps and takes evaluations."""

    def __init__(self) -> None:
        self.measurements = ScriptMeasurements()
        self._boundary: float | None = None  # the last step's end (or evaluation's)

    @contextmanager
    def step(self, samples: int) -> Iterator[None]:
        """One training step on `samples` samples of this worker (its part of the batch)."""
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
            raise ValueError(f"meter.step(samples=...) takes a count of samples, not {samples!r}")
        start = time.perf_counter()
        wait = 0.0 if self._boundary is None else start - self._boundary
        yield
        end = time.perf_counter()
        m = self.measurements
        m.step_times_s.append(wait + end - start)
        m.data_wait_s.append(wait)
        m.samples.append(samples)
        self._boundary = end

    def evaluate(self, accuracy: float, loss: float | None = None) -> None:
        """Record an evaluation just made: its accuracy (0..1) at the training clock's
        current reading; the time since the last step is evaluation, off the clock."""
        now = time.perf_counter()
        m = self.measurements
        if self._boundary is not None:
            m.eval_time_s += now - self._boundary
        m.curve.append((m.train_clock_s, len(m.step_times_s), float(accuracy)))
        m.last_loss = None if loss is None else float(loss)
        self._boundary = now


class NullMeter:
    """The meter outside trainscale: measures nothing and changes nothing."""

    @contextmanager
    def step(self, samples: int) -> Iterator[None]:  # noqa: ARG002 - the active meter's signature
        yield

    def evaluate(self, accuracy: float, loss: float | None = None) -> None:
        """Nothing: no run is being measured."""


_active: StepMeter | None = None


def activate() -> StepMeter:
    """Make a fresh meter this process's active one (a script worker, before the script)."""
    global _active
    _active = StepMeter()
    return _active


def deactivate() -> None:
    global _active
    _active = None


def meter() -> StepMeter | NullMeter:
    """The active meter under trainscale; a no-op meter anywhere else."""
    return _active if _active is not None else NullMeter()
