"""Stopping on a signal: Ctrl-C (SIGINT) or SIGTERM ends a command in one line, 128 + N.

The command's own process turns SIGTERM into an exception, as Python already turns SIGINT
into KeyboardInterrupt, so a run or sweep in progress is recorded as interrupted on the way
out. Worker processes only leave, quietly: their parent records the run, and what a worker
would print while its peers vanish (collective errors, tracebacks) would bury that one line.

Nothing here imports torch: the CLI installs the handlers before any heavy import.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from types import FrameType

from trainscale.errors import TrainscaleError

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a command or a worker cleanly (SIGKILL cannot be caught)."""


class Interrupted(KeyboardInterrupt):
    """A stop signal other than Ctrl-C's SIGINT (SIGTERM, or one the launcher caught).

    A KeyboardInterrupt, so that every `except KeyboardInterrupt` that cleans up after
    Ctrl-C cleans up after `kill` too, and no `except Exception` swallows it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signal.Signals(signum)

    def describe(self) -> str:
        """One line for the terminal (after 'trainscale: ')."""
        return interrupted_reason(self.signum)


def describe(stop: KeyboardInterrupt) -> str:
    """One line for the terminal about a Ctrl-C or a signal (after 'trainscale: ')."""
    if isinstance(stop, Interrupted):
        return stop.describe()
    return interrupted_reason(signal.SIGINT)


class WorkerStopped(SystemExit):
    """Raised in a worker by a stop signal; leaves the process with status 128 + N, silently
    (multiprocessing prints nothing for a SystemExit with a number)."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + int(signum))
        self.signum = signal.Signals(signum)


def stop_signal(error: BaseException) -> signal.Signals | None:
    """The signal an exception stands for: SIGINT for a plain KeyboardInterrupt, else None."""
    if isinstance(error, (Interrupted, WorkerStopped)):
        return error.signum
    if isinstance(error, KeyboardInterrupt):
        return signal.SIGINT
    return None


def interrupted_reason(signum: int) -> str:
    """The reason stored with a run stopped by `signum`, e.g. 'interrupted (SIGTERM)'."""
    return f"interrupted ({signal.Signals(signum).name})"


def failure_reason(error: BaseException) -> str:
    """What to store for a run that `error` ended: the signal's name, or the error itself
    (its one-line message where it is trainscale's own, else its type and message)."""
    signum = stop_signal(error)
    if signum is not None:
        return interrupted_reason(signum)
    if isinstance(error, TrainscaleError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def exit_status(stop: KeyboardInterrupt) -> int:
    """The shell's convention for a process ended by a signal: 128 + N (130, 143)."""
    return 128 + int(stop.signum if isinstance(stop, Interrupted) else signal.SIGINT)


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextmanager
def signals_raise() -> Iterator[None]:
    """While the block runs, SIGTERM raises Interrupted in the main thread (SIGINT already
    raises KeyboardInterrupt); the handlers in place before are restored afterwards.

    Without it, SIGTERM ends the process at once: no failure recorded, no line printed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (and receives them)
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def preserved_handlers(signums: tuple[int, ...]) -> Iterator[None]:
    """Put back the handlers of `signums` after the block, whatever it installed.

    PyTorch's elastic agent installs its own handlers for SIGTERM, SIGINT, SIGHUP and SIGQUIT
    and leaves them in place; after a launch the command's own handling must apply again.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:  # None: set outside Python; nothing to restore
                signal.signal(signum, handler)


@contextmanager
def children_start_deaf() -> Iterator[None]:
    """Processes started in the block begin with SIGINT and SIGTERM held back (blocked).

    A worker takes seconds to import torch before it can install its own handlers; a Ctrl-C
    in that window would print a KeyboardInterrupt traceback from each worker. A blocked
    signal stays pending instead, and `exit_quietly_on_signals` unblocks it once the worker
    can leave quietly. A child inherits the signal mask of the thread that starts it, so the
    main thread blocks the signals for the duration of the block; this process still hears
    them through a thread started before that, which leaves them unblocked (Python runs the
    handler in the main thread all the same, at its next bytecode).
    """
    if not hasattr(signal, "pthread_sigmask") or (
        threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    # Started now, not by the first child: starting it unblocks both signals on its way out.
    resource_tracker.ensure_running()
    done = threading.Event()
    listener = threading.Thread(target=done.wait, name="trainscale-signals", daemon=True)
    listener.start()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        done.set()
        # A signal held back meanwhile is handled here, by the handler in place now.
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        listener.join()


_received: signal.Signals | None = None


def exit_quietly_on_signals() -> None:
    """In a worker process: on SIGINT or SIGTERM, go silent and exit with 128 + N.

    Standard output and error are pointed at /dev/null first, so nothing the worker does on
    its way out (a collective failing because a peer already left, a traceback) reaches
    the terminal it shares with the command. Further stop signals are ignored: the launcher
    forwards the one the command received, and the worker is already leaving (the launcher
    kills it if that takes too long). A signal held back since the worker started (see
    `children_start_deaf`) is handled here, as soon as it is unblocked.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, _exit_quietly)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def received_signal() -> signal.Signals | None:
    """The stop signal this worker received, if any (see `exit_quietly_on_signals`)."""
    return _received


def _exit_quietly(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = signal.Signals(signum)
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    raise WorkerStopped(signum)
