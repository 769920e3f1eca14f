"""What a worker was doing, kept where its launcher can read it if the worker dies.

A worker killed by a signal, or one whose framework exits from C++ (XLA's abort on a
timed-out collective, its exit on an unknown XLA_FLAGS entry), leaves no Python error:
torch's launcher then knows only the signal or the exit status. So a worker notes its
phase at a few coarse points (starting a framework's backend, joining its cluster,
compiling, training; never per step) in a small file in the cache's `failures/` folder,
named after the launch, its rank and its process id; the launcher, which knows the failed
worker's rank and pid, reads it back (`noted_phase`) to say what the worker was doing.

The same folder keeps the workers' saved tracebacks; `prune` keeps it small.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from trainscale.data.cache import cache_dir

FOLDER = "failures"
"""The cache's folder of failure notes: tracebacks and phase files."""

SUFFIX = ".phase"

KEEP_DAYS = 30
"""Files older than this are removed on each save."""

KEEP_NEWEST = 100
"""At most this many files of each kind are kept (the newest)."""


def folder() -> Path:
    """The folder of failure notes (not created here)."""
    return cache_dir() / FOLDER


def phase_path(rank: int, pid: int, launch: str | None = None) -> Path:
    """The phase file of worker `rank` (process `pid`) of launch `launch` (torch's
    TORCHELASTIC_RUN_ID; the worker's own when None)."""
    launch = launch if launch is not None else os.environ.get("TORCHELASTIC_RUN_ID", "none")
    return folder() / f"launch-{launch}-rank-{rank}-pid-{pid}{SUFFIX}"


def note_phase(phase: str, source: str | None = None) -> None:
    """Note that this worker is now `phase` ("joining the TensorFlow cluster"); `source`
    names what prints its own message on the worker's output if it aborts there ("XLA").
    Never fails: a note that cannot be written only makes a death less explained."""
    rank = os.environ.get("RANK")
    if rank is None or not rank.isdigit():  # not a launched worker: nobody to read it
        return
    path = phase_path(int(rank), os.getpid())
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(phase + "\n" + (source or "") + "\n")


def clear_phase() -> None:
    """Remove this worker's phase file (its work ended without dying), and old ones that
    workers which died left behind."""
    rank = os.environ.get("RANK")
    if rank is None or not rank.isdigit():
        return
    with contextlib.suppress(OSError):
        phase_path(int(rank), os.getpid()).unlink(missing_ok=True)
    prune(folder(), f"*{SUFFIX}")


def noted_phase(rank: int, pid: int) -> tuple[str, str] | None:
    """(phase, source) that worker `rank` (process `pid`) noted last, if any. The launch is
    not known here: the rank and pid of a process that just died pick its file."""
    with contextlib.suppress(OSError, ValueError):
        for path in folder().glob(f"launch-*-rank-{rank}-pid-{pid}{SUFFIX}"):
            phase, _, source = path.read_text().partition("\n")
            if phase.strip():
                return phase.strip(), source.strip()
    return None


def prune(directory: Path, pattern: str, now: float | None = None) -> None:
    """Remove the files of `directory` matching `pattern` older than KEEP_DAYS, and all but
    the newest KEEP_NEWEST of the others. Never fails (another process may prune at once)."""
    cutoff = (time.time() if now is None else now) - KEEP_DAYS * 86400
    dated: list[tuple[float, Path]] = []
    with contextlib.suppress(OSError):
        for path in directory.glob(pattern):
            with contextlib.suppress(OSError):
                dated.append((path.stat().st_mtime, path))
    dated.sort(reverse=True)
    for place, (modified, path) in enumerate(dated):
        if place >= KEEP_NEWEST or modified < cutoff:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
