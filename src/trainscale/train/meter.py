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

On a GPU the marks are CUDA events on the current stream, as in trainscale's own loop: the
host queues a step's kernels and runs ahead, so a host clock would time the queueing, not
the step. An event is read only once the device has reached it, and waiting for that every
step would stall the pipeline the meter is measuring, so at each step's end the meter reads
only the steps the device has already passed (asked without waiting) and keeps the others
queued (train/pending_steps.py: a bounded queue, however long the script trains between
evaluations); what is still queued is read where the script synchronises anyway: at
`evaluate()` (the script has just computed an accuracy) and when the script ends
(`settle()`, called by the script runner). The step times are the device's, from one step's
end event to the next's, and still add up to the training clock. The data wait is the
device's idle gap between one step's end event and the next step's start event: while the
host is still ahead, the next step's start event is queued behind the previous step's
kernels and follows its end at once (no wait); where the host took longer to bring the next
batch than the device took to finish the step, the device reaches the start event only once
the host has recorded it, and the gap is exactly the time the device stood idle waiting for
the data.

A meter given a step limit (the bench's rungs: a fixed number of steps of a script that
would otherwise train to its own end) stops the script when the step that reaches it ends,
by raising `StepLimitReached` out of that `with meter.step()` block. It derives from
BaseException, as `KeyboardInterrupt` does, so that a script's `except Exception` lets it
through while its `finally` blocks and context managers still run; every rank counts the
same steps, so every rank of a data-parallel script stops after the same step, with no
collective left waiting for a rank that has gone. The script runner takes it as a normal end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainscale.train.pending_steps import PendingSteps


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
    model_parameters: list[dict[str, Any]] | None = None
    """The trainable parameters of the model given to `meter(model=...)`, in registration
    order: each one's element count, dtype and bytes (what DDP packs into its gradient
    buckets, which the simulator lays out again); None where no model was given."""

    @property
    def train_clock_s(self) -> float:
        return sum(self.step_times_s)


class Clock(Protocol):
    """What the meter times with: marks on the training stream, read in seconds once the
    stream has passed them."""

    def mark(self) -> Any:
        """A point in time on the training stream."""
        ...

    def seconds(self, start: Any, end: Any) -> float:
        """Seconds from mark `start` to mark `end` (both passed)."""
        ...

    def passed(self, mark: Any) -> bool:
        """Whether `mark` can be read now, asked without waiting."""
        ...

    def wait(self, mark: Any) -> None:
        """Wait until `mark` can be read."""
        ...

    def settle(self) -> None:
        """Wait until every mark taken so far can be read."""
        ...


class HostClock:
    """perf_counter readings: a CPU step runs on the host, so the host clock times it, and
    its marks can be read at once."""

    def mark(self) -> float:
        return time.perf_counter()

    def seconds(self, start: float, end: float) -> float:
        return end - start

    def passed(self, mark: float) -> bool:  # noqa: ARG002 - the protocol's signature
        return True

    def wait(self, mark: float) -> None:
        """Nothing to wait for."""

    def settle(self) -> None:
        """Nothing to wait for."""


class DeviceClock:
    """A device's clock (train/timing.py's `CudaStepClock`: CUDA events on the current
    stream), whose marks are read once the device has reached them."""

    def __init__(self, events: Any) -> None:
        self.events = events

    def mark(self) -> Any:
        return self.events.mark()

    def seconds(self, start: Any, end: Any) -> float:
        return float(self.events.seconds(start, end))

    def passed(self, mark: Any) -> bool:
        # cudaEventQuery: whether the device has run the work before the event, no wait.
        return bool(mark.query())

    def wait(self, mark: Any) -> None:
        mark.synchronize()  # cudaEventSynchronize: this event only, not the whole device

    def settle(self) -> None:
        self.events.settle()


def script_clock() -> Clock:
    """The clock for the script as it stands at its first step (or at an evaluation before
    it): CUDA events where it uses CUDA, the host clock otherwise.

    Decided at the first step because by then a GPU script has put its model on the device,
    which initialises CUDA (a `--device cuda` run has too, by selecting the worker's GPU
    before the script starts), while a CPU script never does. A script that has not even
    imported torch trains on no GPU of torch's; the meter looks it up among the loaded
    modules and imports neither torch nor train/timing.py otherwise, so `import trainscale`
    and the no-op meter stay free of torch.
    """
    torch: Any = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return HostClock()
    # torch is loaded (by the script), so train/timing.py's own import of it costs nothing.
    from trainscale.train.timing import CudaStepClock  # noqa: PLC0415 (torch-free until here)

    return DeviceClock(CudaStepClock())


class StepLimitReached(BaseException):
    """The script trained the steps its run allows: raised at the end of the last one.

    A BaseException, so that the script's own `except Exception` does not swallow it."""

    def __init__(self, steps: int) -> None:
        super().__init__(f"the run's limit of {steps} steps is reached")
        self.steps = steps


class StepMeter:
    """The meter of a script run under trainscale: times steps and takes evaluations.

    `max_steps` stops the script after that many steps (`StepLimitReached`); `first_step`
    is called once, at the end of the first step (the script runner's checks of what the
    script has set up by then), and may raise to stop the script. `clock` is what the steps
    are timed with; None: `script_clock()`'s choice at the first step. The measurements
    are complete once `settle()` has run (a device clock's marks are read as the device
    passes them, and the rest there and at `evaluate()`)."""

    def __init__(
        self,
        max_steps: int | None = None,
        first_step: Callable[[], None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"a step limit is a whole number >= 1, not {max_steps!r}")
        self.measurements = ScriptMeasurements()
        self.max_steps = max_steps
        self._first_step = first_step
        self.clock = clock
        self._boundary: Any = None  # the last step's end mark (or evaluation's)
        self._pending = PendingSteps()  # the steps whose marks are not read yet
        self._in_step = False  # inside a step's block: its marks would cut it in two

    @contextmanager
    def step(self, samples: int) -> Iterator[None]:
        """One training step on `samples` samples of this worker (its part of the batch)."""
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
            raise ValueError(f"meter.step(samples=...) takes a count of samples, not {samples!r}")
        if self._in_step:
            raise ValueError(
                "meter.step() blocks do not nest: wrap each optimizer step once (with "
                "gradient accumulation, the whole step, its samples all the micro-batches')"
            )
        m = self.measurements
        if self.max_steps is not None and len(m.samples) >= self.max_steps:
            # A script that caught the stop and trained on: stop it again, before the step.
            raise StepLimitReached(self.max_steps)
        if self.clock is None:
            self.clock = script_clock()
        start = self.clock.mark()
        self._in_step = True
        try:
            yield
        finally:
            self._in_step = False
        end = self.clock.mark()
        self._pending.add(self._boundary, start, end)
        m.samples.append(samples)
        self._boundary = end
        # The steps the device has finished (every one, on the host): read and let go, so
        # that the marks held stay few however long the script trains between evaluations.
        self._take(self._pending.read_passed(self.clock))
        if len(m.samples) == 1 and self._first_step is not None:
            self._first_step()
        if self.max_steps is not None and len(m.samples) >= self.max_steps:
            raise StepLimitReached(self.max_steps)

    def settle(self) -> None:
        """Read every step marked so far into the measurements: a device clock waits for
        the device here, so only call it where the script has synchronised anyway (at an
        evaluation, at its end)."""
        if self._pending and self.clock is not None:
            self.clock.settle()
            self._take(self._pending.read_all(self.clock))

    def _take(self, read: list[tuple[float, float]]) -> None:
        """Steps read, as (data wait s, step time s), into the measurements."""
        m = self.measurements
        for wait_s, step_s in read:
            m.data_wait_s.append(wait_s)
            m.step_times_s.append(step_s)

    def evaluate(self, accuracy: float, loss: float | None = None) -> None:
        """Record an evaluation just made: its accuracy (0..1) at the training clock's
        current reading; the time since the last step is evaluation, off the clock."""
        if self._in_step:
            raise ValueError(
                "meter.evaluate() inside a meter.step() block: evaluate after the step's "
                "block (an evaluation is off the training clock)"
            )
        if isinstance(accuracy, bool) or not 0.0 <= float(accuracy) <= 1.0:
            hint = " (a percentage? divide it by 100)" if 1.0 < float(accuracy) <= 100.0 else ""
            raise ValueError(
                f"meter.evaluate(accuracy=...) takes a fraction in [0, 1], not {accuracy!r}{hint}"
            )
        if self.clock is None:  # an evaluation before the first step: the clock is chosen now
            self.clock = script_clock()
        now = self.clock.mark()
        # The script has just synchronised to compute its accuracy: read the marks here, as
        # the curve point needs the training clock of every step so far.
        self.clock.settle()
        self._take(self._pending.read_all(self.clock))
        m = self.measurements
        if self._boundary is not None:
            m.eval_time_s += self.clock.seconds(self._boundary, now)
        m.curve.append((m.train_clock_s, len(m.samples), float(accuracy)))
        m.last_loss = None if loss is None else float(loss)
        self._boundary = now


def trainable_parameters(model: Any) -> list[dict[str, Any]]:
    """The sizes of `model`'s parameters that take gradients, in registration order, as DDP
    buckets them: {"numel", "dtype", "bytes"} each. Read from the module's own tensors, so
    nothing here imports torch (the script already did)."""
    if not callable(getattr(model, "parameters", None)):
        raise TypeError(
            "meter(model=...) takes the torch.nn.Module the script trains, not "
            f"{type(model).__name__}"
        )
    return [
        {
            "numel": int(param.numel()),
            "dtype": str(param.dtype).removeprefix("torch."),
            "bytes": int(param.numel()) * int(param.element_size()),
        }
        for param in model.parameters()
        if param.requires_grad
    ]


class NullMeter:
    """The meter outside trainscale: measures nothing and changes nothing."""

    @contextmanager
    def step(self, samples: int) -> Iterator[None]:  # noqa: ARG002 - the active meter's signature
        yield

    def evaluate(self, accuracy: float, loss: float | None = None) -> None:
        """Nothing: no run is being measured."""


_active: StepMeter | None = None


def activate(
    max_steps: int | None = None,
    first_step: Callable[[], None] | None = None,
    clock: Clock | None = None,
) -> StepMeter:
    """Make a fresh meter this process's active one (a script worker, before the script);
    `max_steps`, `first_step` and `clock` as `StepMeter` takes them."""
    global _active
    _active = StepMeter(max_steps, first_step, clock)
    return _active


def deactivate() -> None:
    global _active
    _active = None


def meter(*, model: Any = None) -> StepMeter | NullMeter:
    """The active meter under trainscale; a no-op meter anywhere else.

    `model` (optional): the model the script trains, after it is built (a DDP wrapper is
    fine). Under trainscale its trainable parameters' sizes are recorded then and stored
    with the run, so that `trainscale simulate` can lay out its gradient buckets; the no-op
    meter ignores it."""
    if _active is None:
        return NullMeter()
    if model is not None:
        _active.measurements.model_parameters = trainable_parameters(model)
    return _active
