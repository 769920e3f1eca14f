"""Which process owns a 'running' run, and whether it is still there.

A run's row is created 'running' by the process that will record how it ends: the command
that launched the workers, or global rank 0's worker where no such parent exists. Killed
with SIGKILL (the OOM killer, `kill -9`), or gone with its machine, that process can never
finish the row. So the row names its owner: the host name, the pid, and the process's start
time, because after a restart (or a long while) the same pid may belong to another process.
Any later command on the same host can then tell a live owner from a dead one; a row owned
on another host is left alone, since its owner cannot be looked at from here.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import psutil

START_TIME_TOLERANCE_S = 1.0
"""How far two readings of one process's start time may differ (they are derived from the
boot time, which the clock's adjustments can move by a fraction of a second)."""


@dataclass(frozen=True)
class Owner:
    """The process that owns a running run."""

    host: str
    """Host name of its machine (`socket.gethostname()`)."""
    pid: int
    started: float
    """When the process started, in seconds since the epoch (psutil's create_time)."""

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


def this_host() -> str:
    """This machine's host name, as owners record it."""
    return socket.gethostname()


def current_owner() -> Owner:
    """This process, as the owner of a run it creates."""
    pid = os.getpid()
    return Owner(this_host(), pid, psutil.Process(pid).create_time())


def is_here(owner: Owner) -> bool:
    """Whether the owner's host is this machine (only then can it be looked at)."""
    return owner.host == this_host()


def is_alive(owner: Owner) -> bool:
    """Whether the owning process still runs on this machine (call only when `is_here`).

    Gone: no process with that pid, a zombie (it has exited; only its exit status is left),
    or a process with that pid that started at another time (the pid was reused).
    """
    try:
        process = psutil.Process(owner.pid)
        started = process.create_time()
        zombie = process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process with that pid: cannot tell, keep it
        return True
    return not zombie and abs(started - owner.started) <= START_TIME_TOLERANCE_S


def stale_reason(owner: Owner) -> str:
    """The reason stored with a run whose owner is gone."""
    return (
        f"stale: owning process {owner.pid} on {owner.host} is gone without recording how the "
        "run ended (killed, the machine restarted, or the store could not be written)"
    )
