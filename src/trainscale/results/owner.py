"""Which process owns a 'running' run, and whether it is still there.

A run's row is created 'running' by the process that will record how it ends: the command
that launched the workers, or global rank 0's worker where no such parent exists. Killed
with SIGKILL (the OOM killer, `kill -9`), or gone with its machine, that process can never
finish the row. So the row names its owner: the host name, the pid, and the process's start
time, because after a restart (or a long while) the same pid may belong to another process.
Any later command on the same host can then tell a live owner from a dead one; a row owned
on another host is left alone, since its owner cannot be looked at from here.

A host name alone does not say which pids can be seen: containers (often all named
`localhost`) have their own pid namespaces, and machines sharing a store on NFS may share a
name. So an owner also records the machine's boot id and its pid namespace (the inode of
/proc/self/ns/pid). A pid is looked at only when host, boot id and namespace all match; a
row of the same host name with another boot id is stale only if its process started before
this boot (the machine restarted since), else it is taken as another machine's.
"""

from __future__ import annotations

import os
import socket
from contextlib import suppress
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
    boot_id: str | None = None
    """The kernel's boot id of its machine (None: not recorded, from before it was)."""
    pid_ns: int | None = None
    """The inode of its pid namespace (None: not recorded, or not Linux)."""

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


def this_host() -> str:
    """This machine's host name, as owners record it."""
    return socket.gethostname()


def this_boot_id() -> str | None:
    """This boot of this machine's kernel (a new random id at every boot); None off Linux."""
    with suppress(OSError), open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
        return file.read().strip() or None
    return None


def this_pid_namespace() -> int | None:
    """The inode of this process's pid namespace (what pids mean here); None off Linux."""
    with suppress(OSError):
        return os.stat("/proc/self/ns/pid").st_ino
    return None


def current_owner() -> Owner:
    """This process, as the owner of a run it creates."""
    pid = os.getpid()
    return Owner(
        this_host(),
        pid,
        psutil.Process(pid).create_time(),
        this_boot_id(),
        this_pid_namespace(),
    )


def encode_host(owner: Owner) -> str:
    """The owner's host, boot id and pid namespace, as stored in the one `owner_host` column.

    'HOST boot=ID pidns=N': a host name has no spaces. Kept in the existing column (no new
    schema version) so that an older trainscale still opens the store, and, comparing the
    whole text with its host name, never takes such a row for one of its own.
    """
    parts = [owner.host]
    if owner.boot_id is not None:
        parts.append(f"boot={owner.boot_id}")
    if owner.pid_ns is not None:
        parts.append(f"pidns={owner.pid_ns}")
    return " ".join(parts)


def decode_host(text: str) -> tuple[str, str | None, int | None]:
    """`encode_host` reversed: (host, boot id, pid namespace); a plain host name (rows from
    before they were recorded) gives None for both. Unknown or damaged parts are ignored."""
    host, *parts = text.split(" ")
    boot_id: str | None = None
    pid_ns: int | None = None
    for part in parts:
        key, _, value = part.partition("=")
        if key == "boot" and value:
            boot_id = value
        elif key == "pidns" and value.isdigit():
            pid_ns = int(value)
    return host, boot_id, pid_ns


def is_here(owner: Owner) -> bool:
    """Whether the owner's pid means the same process here (only then can it be looked at):
    the same host name, and, where the owner recorded them, the same boot and pid namespace.

    Recorded on one side only counts as different: nothing can be told then.
    """
    if owner.host != this_host():
        return False
    if owner.boot_id is None and owner.pid_ns is None:  # recorded before these were: as then
        return True
    return owner.boot_id == this_boot_id() and owner.pid_ns == this_pid_namespace()


def was_rebooted(owner: Owner) -> bool:
    """Whether the owner's machine is this one, restarted since: same host name, another
    boot id, and a process that started before this boot.

    The start time tells a restart from another live machine of the same name (a container
    image's `localhost` on two machines sharing a store): the latter's run started lately,
    long after this machine booted, and is left alone.
    """
    if owner.host != this_host() or owner.boot_id is None:
        return False
    booted = this_boot_id()
    if booted is None or booted == owner.boot_id:
        return False
    return owner.started < psutil.boot_time() - START_TIME_TOLERANCE_S


def is_gone(owner: Owner) -> bool:
    """Whether the owner can be known never to finish its run: its machine restarted since,
    or its pid is visible here (`is_here`) and the process is no longer there."""
    return was_rebooted(owner) or (is_here(owner) and not is_alive(owner))


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


STALE_PREFIX = "stale: "
"""How the reason of a run failed as stale starts: a guess by a reader, which the owner's
own result, should it still arrive, replaces."""


def stale_reason(owner: Owner) -> str:
    """The reason stored with a run whose owner is gone."""
    return (
        f"{STALE_PREFIX}owning process {owner.pid} on {owner.host} is gone without recording "
        "how the run ended (killed, the machine restarted, or the store could not be written)"
    )
