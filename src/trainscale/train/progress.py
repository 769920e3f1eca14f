"""Progress display for the main rank; a null sink everywhere else."""

from __future__ import annotations

import os
import sys
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)


class ProgressSink(Protocol):
    def start(self, total_steps: int, description: str) -> None: ...
    def update(self, step: int, **fields: float) -> None: ...
    def log(self, message: str) -> None: ...
    def stop(self) -> None: ...


class NullProgress:
    """Shows nothing (non-main ranks, --quiet, tests)."""

    def start(self, total_steps: int, description: str) -> None:
        pass

    def update(self, step: int, **fields: float) -> None:
        pass

    def log(self, message: str) -> None:
        pass

    def stop(self) -> None:
        pass


class LineProgress(NullProgress):
    """Plain lines on stderr at evaluation points, for logs and non-terminal output."""

    def log(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)


class RichProgress:
    """A rich progress bar on stderr: steps, ETA, loss and the last test accuracy."""

    def __init__(self) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._task: TaskID | None = None

    def start(self, total_steps: int, description: str) -> None:
        self._progress.start()
        self._task = self._progress.add_task(description, total=total_steps, status="")

    def update(self, step: int, **fields: float) -> None:
        if self._task is None:  # not started
            return
        status = "  ".join(f"{k} {v:.4g}" for k, v in fields.items())
        self._progress.update(self._task, completed=step, status=status)

    def log(self, message: str) -> None:
        self._progress.console.print(message)

    def stop(self) -> None:
        self._progress.stop()


class FileProgress(NullProgress):
    """The step count written to a file ("STEP TOTAL"), for a parent that shows it: a
    sweep's run has no terminal of its own, its parent's progress bar owns stderr.

    Each write replaces the file whole (os.replace), so a reader never sees half a line.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._total = 0

    def start(self, total_steps: int, description: str) -> None:
        self._total = total_steps
        self._write(0)

    def update(self, step: int, **fields: float) -> None:
        self._write(step)

    def _write(self, step: int) -> None:
        temporary = f"{self._path}.tmp"
        try:
            with open(temporary, "w", encoding="ascii") as handle:
                handle.write(f"{step} {self._total}\n")
            os.replace(temporary, self._path)
        except OSError:  # a display aid: never a reason for the run to fail
            pass


def read_progress_file(path: str) -> tuple[int, int] | None:
    """(step, total) from a FileProgress file; None when absent or not (yet) readable."""
    try:
        with open(path, encoding="ascii") as handle:
            step, total = handle.read().split()
        return int(step), int(total)
    except (OSError, ValueError):
        return None


def make_progress(is_main: bool, quiet: bool, progress_file: str | None = None) -> ProgressSink:
    """A bar on a terminal, plain lines otherwise, nothing off the main rank or when quiet;
    with `progress_file`, the main rank's step count goes to that file instead."""
    if is_main and progress_file is not None:
        return FileProgress(progress_file)
    if not is_main or quiet:
        return NullProgress()
    if sys.stderr.isatty():
        return RichProgress()
    return LineProgress()
