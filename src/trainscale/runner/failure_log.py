"""Where a failed worker's full traceback is kept, so that the terminal gets one line.

A worker that fails writes its whole traceback (the user's error and what it caused) to a
file named after the run and its rank, in the cache directory; the command then prints the
one-line reason the run is stored with and points at the file. Without it an error in a
workload's forward pass printed about 90 lines: the worker's traceback, then the elastic
launcher's copy of it, before the one line that says what happened.

The folder is pruned on each save (files older than 30 days, and all but the newest 100):
tracebacks are for the failure just seen, not an archive.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from trainscale.parallel import breadcrumbs

SUBDIR = breadcrumbs.FOLDER
"""The cache's folder of tracebacks (a small text file per failed worker), beside the
workers' phase notes."""


def traceback_path(run_id: str, rank: int) -> Path:
    """The file where rank `rank` of run `run_id` keeps its traceback if it fails."""
    return breadcrumbs.folder() / f"run-{run_id}-rank-{rank}.txt"


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
    # Here, not on a schedule: only failures add files. Phase notes of workers that died
    # without a traceback go too.
    breadcrumbs.prune(path.parent, "run-*-rank-*.txt")
    breadcrumbs.prune(path.parent, f"*{breadcrumbs.SUFFIX}")
    return path


def saved_traceback(run_id: str | None, rank: int | None) -> Path | None:
    """The traceback file rank `rank` of run `run_id` wrote, if there is one."""
    if not run_id or rank is None:
        return None
    path = traceback_path(run_id, rank)
    return path if path.is_file() else None


LOST_PEER_MARKS = ("closed by peer", "reset by peer", "timed out waiting")
"""What gloo's and NCCL's errors say when another worker's process or node went away."""


def lost_a_peer(error: BaseException) -> bool:
    """Whether `error` is a collective that lost another worker (its node died, its process
    was killed): the run's one line says so, and the worker's own traceback, which only
    shows where it was waiting, stays in its file."""
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(mark in text for mark in LOST_PEER_MARKS)
