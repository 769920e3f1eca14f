"""Progress display for the main rank; a null sink everywhere else."""

from __future__ import annotations

import sys
from typing import Protocol


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
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = None

    def start(self, total_steps: int, description: str) -> None:
        self._progress.start()
        self._task = self._progress.add_task(description, total=total_steps, status="")

    def update(self, step: int, **fields: float) -> None:
        status = "  ".join(f"{k} {v:.4g}" for k, v in fields.items())
        self._progress.update(self._task, completed=step, status=status)

    def log(self, message: str) -> None:
        self._progress.console.print(message)

    def stop(self) -> None:
        self._progress.stop()


def make_progress(is_main: bool, quiet: bool) -> ProgressSink:
    """A bar on a terminal, plain lines otherwise, nothing off the main rank or when quiet."""
    if not is_main or quiet:
        return NullProgress()
    if sys.stderr.isatty():
        return RichProgress()
    return LineProgress()
