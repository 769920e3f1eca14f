"""The steps a script's meter has marked but not read yet, read as soon as the device has
passed them (train/meter.py).

On a GPU a step's marks are CUDA events, readable only once the device has reached them.
Reading them all at the script's next synchronisation (an evaluation, its end) would keep
every mark until then: a script that never evaluates, or trains a million steps between
two evaluations, would hold an event pair per step. So at each step boundary the meter
reads the oldest steps whose marks the device has passed (`query()`, which does not wait)
and drops them; the steps still queued on the device stay, usually one or two, as the host
is rarely far ahead. A host that keeps running ahead (steps the device takes far longer to
run than the host to queue) would still grow the queue, so beyond `MAX_PENDING_STEPS` the
meter waits for the oldest step: the host then stays that many steps ahead, which keeps
the device fed all the same. Each step is read from the same marks as before, only
sooner, so the figures are the same.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

MAX_PENDING_STEPS = 2048
"""Steps the host may run ahead of the device before the meter waits for the oldest: far
more than any queue of kernels keeps a device busy, few enough to hold (two events each)."""


class Marks(Protocol):
    """What the queue asks of a clock about its marks."""

    def seconds(self, start: Any, end: Any) -> float:
        """Seconds from mark `start` to mark `end`, both passed."""
        ...

    def passed(self, mark: Any) -> bool:
        """Whether the device has reached `mark`, without waiting for it."""
        ...

    def wait(self, mark: Any) -> None:
        """Wait until the device has reached `mark`."""
        ...


Step = tuple[Any, Any, Any]
"""A step's marks: the previous step's end (None for the first step), its start, its end."""


class PendingSteps:
    """The steps marked and not read yet, oldest first."""

    def __init__(self, limit: int = MAX_PENDING_STEPS) -> None:
        if limit < 1:
            raise ValueError(f"a queue of steps holds at least 1, not {limit!r}")
        self.limit = limit
        self._steps: deque[Step] = deque()

    def __len__(self) -> int:
        return len(self._steps)

    def add(self, boundary: Any, start: Any, end: Any) -> None:
        """Queue a step's marks (`boundary`: the previous step's end, None for the first)."""
        self._steps.append((boundary, start, end))

    def read_passed(self, clock: Marks) -> list[tuple[float, float]]:
        """(data wait s, step time s) of the oldest steps the device has passed, dropped from
        the queue, in order; beyond the limit the oldest are waited for until it holds."""
        read = []
        steps = self._steps
        while steps:
            if len(steps) > self.limit:
                for mark in steps[0]:
                    if mark is not None:
                        clock.wait(mark)
            elif not all(clock.passed(mark) for mark in reversed(steps[0]) if mark is not None):
                # The end first: the device passes a stream's marks in order, so where it has
                # not reached the oldest step's end it has reached no later mark either.
                break
            read.append(_seconds(clock, steps.popleft()))
        return read

    def read_all(self, clock: Marks) -> list[tuple[float, float]]:
        """(data wait s, step time s) of every queued step, in order, the queue emptied: call
        it once the clock has settled (every mark passed)."""
        read = [_seconds(clock, step) for step in self._steps]
        self._steps.clear()
        return read


def _seconds(clock: Marks, step: Step) -> tuple[float, float]:
    """A step's data wait (0 for the first step) and its time, from its marks: one mark per
    step boundary, so the step times add up to the training clock."""
    boundary, start, end = step
    if boundary is None:
        return 0.0, clock.seconds(start, end)
    return clock.seconds(boundary, start), clock.seconds(boundary, end)
