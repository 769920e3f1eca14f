"""The step count of a sweep's run in progress, read from the file its main worker writes.

The run's workers are other processes and the sweep's progress bar owns the terminal, so
the main worker writes "STEP TOTAL" to a file (`train.progress.FileProgress`) and a thread
of the sweep reads it twice a second and hands it to the listener.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from trainscale.train.progress import read_progress_file

POLL_S = 0.5
"""How often the file is read: often enough for a bar, rare enough to cost nothing."""


@contextlib.contextmanager
def watch_steps(path: str, report: Callable[[int, int], None]) -> Iterator[None]:
    """While the block runs, call `report(step, total)` whenever the file at `path` says a
    new step count; once more at the end, so the last count is not missed."""
    stop = threading.Event()
    last: list[tuple[int, int] | None] = [None]

    def poll() -> None:
        seen = read_progress_file(path)
        if seen is not None and seen != last[0]:
            last[0] = seen
            report(*seen)

    def loop() -> None:
        while not stop.wait(POLL_S):
            poll()

    thread = threading.Thread(target=loop, name="trainscale-step-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        poll()
