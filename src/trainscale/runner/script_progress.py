"""Progress of a script run on rank 0's terminal: a line every ~10 s while the script trains,
and a line that says so when a step hangs.

A built-in run draws its own loop's progress; a script owns its loop, so trainscale learns
of its steps only through the meter. A daemon thread of rank 0's worker reads the active
meter's measurements (train/meter.py `ScriptMeasurements`) once a second and writes a line
every `INTERVAL_S`: the steps so far, the samples per second over the last interval, the
data-wait share so far and how long ago the last step ended. No more often than that: the
script's own prints share the terminal. Where no step has ended for `HANG_FACTOR` times the
median step, and for more than `HANG_MIN_S`, the line says which step has run how long
instead (a step stuck in a collective, a DataLoader that stopped feeding, a deadlock).

The thread never touches the script's thread: it only reads. The script's thread appends to
the measurements' lists, and in CPython `list.append`, `len()` and a slice are each one
call that runs whole while it holds the interpreter lock (the GIL; a free-threaded build
locks each list instead), so a slice taken here is a consistent copy: every item in it is
complete, and the script's thread never waits on this one. The lists are appended at
different moments (a step's samples at its end, its time where the meter reads its marks),
so each is copied once per line and only their common length is paired.

The thread notes when it sees the step count change, so "the last step ended" is known to
within `POLL_S`; on a GPU the step times are read as the device finishes the steps (a
few behind the host), so until one is read, the typical step is the host's view:
the time between the step ends the thread saw.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from trainscale.train.meter import StepMeter, meter

INTERVAL_S = 10.0
"""Seconds between two lines."""
POLL_S = 1.0
"""Seconds between two looks at the step count (the precision of "the last step ended")."""
HANG_FACTOR = 10.0
"""A step that has run this many times the median step (of the last `TYPICAL_OF_LAST`),
and more than `HANG_MIN_S`..."""
HANG_MIN_S = 30.0
"""...is said to hang (the minimum keeps a slow data reload or a checkpoint quiet)."""
TYPICAL_OF_LAST = 1000
"""The steps whose median is a typical step for the hang line: the recent ones, so that a
line's sort stays small in a run of millions of steps (a script's thread waits for it)."""


class Measured(Protocol):
    """What the lines read of a worker's measurements (`ScriptMeasurements`)."""

    step_times_s: list[float]
    data_wait_s: list[float]
    samples: list[int]


@dataclass
class Watch:
    """The lines of one script run, from its measurements and the time given (no thread
    and no clock of its own, so the text can be tested from made-up readings)."""

    started_s: float
    """When the script started (the clock's reading)."""
    steps_seen: int = 0
    last_end_s: float | None = None
    """When the thread saw the step count last change: the last step's end, within a poll."""
    first_end_s: float | None = None
    steps_at_first_end: int = 0
    line_s: float = field(init=False)
    """When the last line was made (the script's start before the first)."""
    line_steps: int = 0
    """Steps ended when the last line was made."""

    def __post_init__(self) -> None:
        self.line_s = self.started_s

    def observe(self, measured: Measured, now_s: float) -> None:
        """Note the step count at `now_s` (a poll between lines)."""
        self._see(len(measured.samples), now_s)

    def _see(self, steps: int, now_s: float) -> None:
        if steps == self.steps_seen:
            return
        if self.first_end_s is None:
            self.first_end_s, self.steps_at_first_end = now_s, steps
        self.last_end_s, self.steps_seen = now_s, steps

    def line(self, measured: Measured, now_s: float) -> str:
        """The line for `now_s`, which starts the next interval."""
        samples = measured.samples[:]  # one copy each: see the module's note
        times = measured.step_times_s[:]
        waits = measured.data_wait_s[:]
        self._see(len(samples), now_s)
        text = self._hang(times, now_s) or self._progress(samples, times, waits, now_s)
        self.line_s, self.line_steps = now_s, len(samples)
        return f"trainscale: {text}"

    def _progress(
        self, samples: list[int], times: list[float], waits: list[float], now_s: float
    ) -> str:
        if not samples:
            return f"no step yet: the script has run {now_s - self.started_s:.0f} s"
        interval = now_s - self.line_s
        done = sum(samples[self.line_steps :])
        rate = (
            f"{done / interval:.1f} samples/s over the last {interval:.0f} s"
            if done and interval > 0
            else f"no step ended in the last {interval:.0f} s"
        )
        parts = [f"{len(samples)} steps", rate]
        paired = min(len(times), len(waits))
        clock = sum(times[:paired])
        if clock > 0:  # none read yet on a GPU until the device finishes a step
            parts.append(f"data wait {sum(waits[:paired]) / clock:.0%} so far")
        assert self.last_end_s is not None  # steps were seen
        parts.append(f"last step ended {now_s - self.last_end_s:.1f} s ago")
        return ", ".join(parts)

    def _hang(self, times: list[float], now_s: float) -> str | None:
        """The hang line where the running step has run too long, else None."""
        if self.last_end_s is None:
            return None  # before the first step: a script may load its data for minutes
        recent = times[-TYPICAL_OF_LAST:]  # bounded work a line, however long the run
        typical = statistics.median(recent) if recent else self._host_step_s()
        if typical is None:
            return None
        running = now_s - self.last_end_s
        if running <= max(HANG_MIN_S, HANG_FACTOR * typical):
            return None
        if len(times) == self.steps_seen:
            last = f"the last step took {times[-1]:.1f} s"
        else:
            last = f"a step took {typical:.1f} s on average"
        return f"step {self.steps_seen + 1} has run {running:.0f} s ({last})"

    def _host_step_s(self) -> float | None:
        """A step's time as the host saw the steps end; None before two were seen."""
        if self.first_end_s is None or self.last_end_s is None:
            return None
        steps = self.steps_seen - self.steps_at_first_end
        return (self.last_end_s - self.first_end_s) / steps if steps else None


def active_measurements() -> Measured | None:
    """The measurements of this process's active meter; None while none is active."""
    active = meter()
    return active.measurements if isinstance(active, StepMeter) else None


class ProgressThread:
    """The daemon thread that writes a `Watch`'s lines to `stream` until `stop()`."""

    def __init__(
        self,
        stream: TextIO,
        source: Callable[[], Measured | None] = active_measurements,
        interval_s: float = INTERVAL_S,
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._source = source
        self._interval_s = interval_s
        self._poll_s = poll_s
        self._clock = clock
        self._stopped = threading.Event()
        # A daemon: a thread that only reports must never keep a finished worker alive.
        self._thread = threading.Thread(target=self._run, name="trainscale-progress", daemon=True)

    def start(self) -> ProgressThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it (a poll at most)."""
        self._stopped.set()
        self._thread.join(timeout=self._poll_s + 1.0)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        watch = Watch(self._clock())
        due = watch.started_s + self._interval_s
        while not self._stopped.wait(self._poll_s):
            measured = self._source()
            if measured is None:  # the script's meter is not active yet, or any more
                continue
            now = self._clock()
            if now < due:
                watch.observe(measured, now)
                continue
            self._write(watch.line(measured, now))
            due = now + self._interval_s

    def _write(self, line: str) -> None:
        try:
            self._stream.write(line + "\n")  # one write: a script's print cannot split it
            self._stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal: a display aid only
            self._stopped.set()


@contextmanager
def shown(enabled: bool, stream: TextIO) -> Iterator[None]:
    """Progress lines on `stream` while the block runs (the script), where `enabled`."""
    if not enabled:
        yield
        return
    thread = ProgressThread(stream).start()
    try:
        yield
    finally:
        thread.stop()
