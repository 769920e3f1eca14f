"""The meter's device marks on a long run: read as the device passes them, so the marks held
stay few however many steps pass between evaluations, with no wait for the device in the
steps (but beyond the cap of steps the host may run ahead), and the figures exactly those
of reading every mark at the script's synchronisations."""

from __future__ import annotations

import random
from typing import ClassVar

from trainscale.train.meter import DeviceClock, StepMeter
from trainscale.train.pending_steps import MAX_PENDING_STEPS


class Mark:
    """A device event: its index on the stream; counts the marks alive (held anywhere)."""

    alive: ClassVar[int] = 0

    def __init__(self, index: int) -> None:
        self.index = index
        Mark.alive += 1

    def __del__(self) -> None:
        Mark.alive -= 1


class LazyDevice:
    """A device clock on the CPU whose marks the device passes in its own time: `lag(n)`
    says how many of the newest of n marks it has not reached yet when the n-th is taken
    (never less than before). A mark is read only once passed, as a CUDA event."""

    def __init__(self, lag: object) -> None:
        self.lag = lag
        self.now = 0.0
        self.times: list[float] = []
        self.reached = 0  # marks the device has passed, in stream order
        self.waits = 0
        self.settles = 0

    def mark(self) -> Mark:
        self.times.append(self.now)
        count = len(self.times)
        self.reached = max(self.reached, count - self.lag(count))  # type: ignore[operator]
        return Mark(count - 1)

    def passed(self, mark: Mark) -> bool:
        return mark.index < self.reached

    def wait(self, mark: Mark) -> None:
        self.waits += 1
        self.reached = max(self.reached, mark.index + 1)

    def seconds(self, start: Mark, end: Mark) -> float:
        assert max(start.index, end.index) < self.reached, "a mark read before it passed"
        return self.times[end.index] - self.times[start.index]

    def settle(self) -> None:
        self.settles += 1
        self.reached = len(self.times)


def _train(meter: StepMeter, clock: LazyDevice, steps: int) -> tuple[int, list[float], list[float]]:
    """`steps` steps of made-up times (with data waits and an evaluation every 10,000).
    Returns the most marks held at once, and each step's data wait and time as reading
    every mark at the end would give them: from the previous step's end (or evaluation's)
    to the step's start, and to its end."""
    rng = random.Random(0)
    most, boundary, before = 0, None, Mark.alive
    waits: list[float] = []
    times: list[float] = []
    for step in range(steps):
        clock.now += rng.choice((0.0, 0.0, 0.001 * rng.randint(1, 9)))  # the next batch
        start = clock.now
        with meter.step(samples=8):
            clock.now += 0.001 * rng.randint(1, 50)
        waits.append(0.0 if boundary is None else start - boundary)
        times.append(clock.now - (start if boundary is None else boundary))
        boundary = clock.now
        most = max(most, Mark.alive - before)
        if step % 10_000 == 9_999:
            clock.now += 0.25
            meter.evaluate(accuracy=0.5)
            boundary = clock.now
    return most, waits, times


def _never_before_settled(count: int) -> int:  # the device is reached only at a settle
    return count


def test_a_long_run_holds_few_marks_and_reads_the_same_figures() -> None:
    rng = random.Random(1)
    lazy = LazyDevice(lambda count: rng.randint(0, 6))  # a device a few marks behind
    meter = StepMeter(clock=lazy)
    held, waits, times = _train(meter, lazy, 100_000)
    assert held <= 16  # the few steps still queued, not one event pair per step
    assert lazy.waits == 0 and lazy.settles == 10  # no wait in a step: the evaluations'
    meter.settle()
    m = meter.measurements
    assert len(m.step_times_s) == 100_000
    # Exactly the figures of reading every mark at the end: the same marks, read sooner.
    assert (m.data_wait_s, m.step_times_s) == (waits, times)


def test_a_host_far_ahead_of_the_device_waits_for_the_oldest_step_beyond_the_cap() -> None:
    ahead = LazyDevice(_never_before_settled)  # the device reaches no mark on its own
    meter = StepMeter(clock=ahead)
    held, waits, times = _train(meter, ahead, MAX_PENDING_STEPS + 500)
    assert held <= 2 * MAX_PENDING_STEPS + 3  # two events a step, the cap's worth
    assert ahead.waits >= 500 and ahead.settles == 0
    assert len(meter.measurements.step_times_s) == 500  # the oldest, read once waited for
    meter.settle()
    assert (meter.measurements.data_wait_s, meter.measurements.step_times_s) == (waits, times)


class Event:
    """torch.cuda.Event's non-blocking query and its wait for this event alone."""

    def __init__(self, done: bool) -> None:
        self.done, self.synchronized = done, False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.synchronized = self.done = True


def test_the_device_clock_asks_the_event_and_waits_for_that_event_only() -> None:
    clock = DeviceClock(events=None)  # torch's events, as train/timing.py records them
    busy, finished = Event(done=False), Event(done=True)
    assert not clock.passed(busy) and clock.passed(finished)
    assert not busy.synchronized  # asking never waits
    clock.wait(busy)
    assert busy.synchronized and clock.passed(busy)
