"""Notice a worker that ended without finishing its work, which the elastic agent does not.

The agent waits for a return value from every worker; a worker whose process ended with
status 0 before putting one (the workload called `os._exit(0)`) is never reported, and the
launch would wait forever. The watch follows the agent's own process context (the one its
`start_processes` returns): it knows each local worker's process and global rank, and its
"finished" event, which the agent sets only once every return value is in. A worker whose
process ended while that event is unset left without finishing (a worker that returned
normally waits on the event before it exits). The watch then signals this process, so that
the agent stops the other workers on its usual stop path, and the launcher reports the
worker instead of an interruption.

A daemon thread that wakes a few times a second: no cost per training step.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from torch.distributed.elastic.agent.server import local_elastic_agent

STOP_SIGNAL = signal.SIGTERM
"""What the watch sends this process: one of the signals the agent stops on."""

POLL_S = 0.25
"""How often the watch looks at the workers."""

GRACE_S = 2.0
"""How long a worker must have been gone, its work unfinished, before the launch stops."""


class ExitWatch:
    """Watches the workers of one launch; `reason` and `rank` are set once it stopped it."""

    def __init__(self, poll_s: float = POLL_S, grace_s: float = GRACE_S) -> None:
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.reason: str | None = None
        self.rank: int | None = None
        self._contexts: list[tuple[Any, dict[int, dict[str, str]]]] = []
        self._done = threading.Event()

    def record(self, context: Any, envs: dict[int, dict[str, str]]) -> None:
        """Follow a process context the agent started (with each local rank's environment)."""
        self._contexts.append((context, envs))

    def unfinished_exit(self) -> tuple[int, str] | None:
        """(global rank, one line) for a worker that ended without finishing, else None."""
        for context, envs in list(self._contexts):
            processes = getattr(getattr(context, "_pc", None), "processes", None)
            finished = getattr(context, "_worker_finished_event", None)
            if not processes or finished is None or finished.is_set():
                continue
            for local_rank, process in enumerate(processes):
                # A non-zero status is the agent's to report (an exception, a signal).
                if _exit_status(process) != 0:
                    continue
                rank = int(envs.get(local_rank, {}).get("RANK", local_rank))
                return rank, (
                    f"worker rank {rank} (pid {process.pid}) ended (exit status 0) without "
                    "finishing its work: the workload ended the process (os._exit?)"
                )
        return None

    def watch(self, stop: Callable[[], None]) -> None:
        """Loop until `close`: once a worker has been gone unfinished for the grace
        period, keep the reason and call `stop` (once)."""
        seen_at: float | None = None
        while not self._done.wait(self.poll_s):
            clock = time.monotonic()
            found = self.unfinished_exit()
            if found is None:
                seen_at = None
                continue
            if seen_at is None:
                seen_at = clock
            if clock - seen_at >= self.grace_s:
                self.rank, self.reason = found
                stop()
                return

    def close(self) -> None:
        """End the watch (the launch has returned or raised)."""
        self._done.set()


def _exit_status(process: Any) -> int | None:
    """A worker process's exit status (negative: the signal), None while it runs.

    Looks without reaping it (WNOWAIT): the agent's main thread reaps its workers, and a
    second thread's waitpid racing it would make the agent read no status at all.
    """
    if not hasattr(os, "waitid"):  # no WNOWAIT here: multiprocessing's own look
        return process.exitcode
    try:
        ended = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped already: its status is kept, or being kept
        return process.exitcode
    if ended is None:
        return None
    return ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status


def _signal_self() -> None:
    """Stop the agent the way a stop signal does: it stops the workers, then raises."""
    os.kill(os.getpid(), STOP_SIGNAL)


@contextmanager
def watching_exits(stop: Callable[[], None] = _signal_self) -> Iterator[ExitWatch]:
    """Watch the workers the elastic agent starts inside the block.

    The agent's `start_processes` is wrapped for the block's duration so that the watch
    gets the context it returns. Only from the main thread: that is where the agent
    installs its signal handlers, so where the stop signal becomes its clean stop.
    """
    watch = ExitWatch()
    if threading.current_thread() is not threading.main_thread():
        yield watch
        return
    original = local_elastic_agent.start_processes

    def start_processes(*args: Any, **kwargs: Any) -> Any:
        context = original(*args, **kwargs)
        watch.record(context, kwargs.get("envs") or {})
        return context

    local_elastic_agent.start_processes = start_processes
    thread = threading.Thread(target=watch.watch, args=(stop,), name="exit-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch.close()
        local_elastic_agent.start_processes = original
        thread.join()
