"""A bound on how long a trainscale process may take to exit once its own work is done.

A custom workload's file is imported in the command's process and in every worker. A
non-daemon thread it starts, or an exit hook it registers, would otherwise keep the process
alive after the run is stored: the interpreter joins non-daemon threads and runs `atexit`
hooks before it exits, and the command's launcher waits for its workers to exit.

`arm(status, who)` starts a daemon thread that waits until the interpreter begins to shut
down. `threading._shutdown` (3.11 to 3.13) marks the main thread finished *before* it joins
the non-daemon threads, and the `atexit` hooks run after that, so `main_thread().join()`
returns exactly when the process's own work is over. If the process is still alive
`deadline_s()` seconds later, the thread prints one line naming what is still running and
ends the process with `os._exit(status)`. A clean exit never waits: the daemon thread is
simply dropped with the interpreter.

Only trainscale's own processes (the console command, its workers) arm it; a user's script
calling the Python API keeps its threads, it is their process.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

DEADLINE_ENV = "TRAINSCALE_EXIT_DEADLINE"
"""Seconds a process may take to exit after its work is done (default `DEFAULT_DEADLINE_S`)."""

DEFAULT_DEADLINE_S = 5.0

_P = ParamSpec("_P")
_R = TypeVar("_R")


def deadline_s() -> float:
    """The exit deadline in seconds: `$TRAINSCALE_EXIT_DEADLINE` when it is a number >= 0,
    else the default (a bad value must not turn a finished run into a failure)."""
    text = os.environ.get(DEADLINE_ENV, "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_DEADLINE_S
    return value if value >= 0 else DEFAULT_DEADLINE_S


def arm(status: int, who: str = "trainscale") -> None:
    """Exit with `status` if the process is still alive `deadline_s()` after its main
    thread has finished; `who` starts the line printed then."""
    watcher = threading.Thread(
        target=_watch, args=(status, who, deadline_s()), name="trainscale-exit-deadline"
    )
    watcher.daemon = True  # never one of the threads the interpreter waits for
    watcher.start()


def bounded_exit(who: Callable[[], str]) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorate a process's entry function: once it has returned (status 0) or raised (the
    status a `SystemExit` carries, else 1, as `multiprocessing` exits), the process gets
    `deadline_s()` to exit. `who()` names the process when the call ends (a worker learns
    its rank from its environment only then)."""

    def decorate(function: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(function)
        def bounded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                result = function(*args, **kwargs)
            except SystemExit as stop:
                arm(stop.code if isinstance(stop.code, int) else 1, who())
                raise
            except BaseException:
                arm(1, who())
                raise
            arm(0, who())
            return result

        return bounded

    return decorate


def _watch(status: int, who: str, deadline: float) -> None:
    threading.main_thread().join()  # returns once the interpreter starts shutting down
    # A clean exit ends the interpreter during this sleep, and this thread with it.
    time.sleep(deadline)
    line = (
        f"{who}: {_still_running()} still running {deadline:g} s after the work ended; "
        f"exiting with status {status}\n"
    )
    # Flush what was printed (a JSON document, progress) before os._exit drops the buffers.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(OSError):
        os.write(2, line.encode(errors="replace"))  # straight to the fd: no lock to wait on
    os._exit(status)


def _still_running() -> str:
    """What keeps the process alive: its non-daemon threads by name, else an exit hook."""
    names = [
        thread.name
        for thread in threading.enumerate()
        if not thread.daemon and thread is not threading.main_thread() and thread.is_alive()
    ]
    if not names:
        return "an exit hook was"
    noun = "thread" if len(names) == 1 else "threads"
    verb = "was" if len(names) == 1 else "were"
    return f"{noun} {', '.join(repr(name) for name in names)} {verb}"
