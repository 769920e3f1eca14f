"""Where a failed worker's full traceback is kept, so that the terminal gets one line.

A worker that fails writes its whole traceback (the user's error and what it caused) to a
file named after the run and its rank, in the cache directory; the command then prints the
one-line reason the run is stored with and points at the file. Without it an error in a
workload's forward pass printed about 90 lines: the worker's traceback, then the elastic
launcher's copy of it, before the one line that says what happened.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from trainscale.data.cache import cache_dir

SUBDIR = "failures"
"""The cache's folder of tracebacks (a small text file per failed worker)."""


def traceback_path(run_id: str, rank: int) -> Path:
    """The file where rank `rank` of run `run_id` keeps its traceback if it fails."""
    return cache_dir() / SUBDIR / f"run-{run_id}-rank-{rank}.txt"


def save_traceback(error: BaseException, run_id: str, rank: int) -> Path | None:
    """Write `error`'s traceback (with its causes) where `traceback_path` says; the path, or
    None when it could not be written (a read-only or full disk: the run's failure must not
    become another error)."""
    path = traceback_path(run_id, rank)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(error)))
    except OSError:
        return None
    return path


def saved_traceback(run_id: str | None, rank: int | None) -> Path | None:
    """The traceback file rank `rank` of run `run_id` wrote, if there is one."""
    if not run_id or rank is None:
        return None
    path = traceback_path(run_id, rank)
    return path if path.is_file() else None
