"""Where this process sits in a (possibly distributed) job, read once from the environment."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DistEnv:
    """Rank facts set by torchrun / the elastic launcher (or srun); passed around explicitly."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> DistEnv:
        """Read torchrun's variables; a plain process is rank 0 of 1."""
        env = os.environ if environ is None else environ
        if "RANK" not in env or "WORLD_SIZE" not in env:
            return cls()
        world_size = int(env["WORLD_SIZE"])
        return cls(
            rank=int(env["RANK"]),
            local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
            world_size=world_size,
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", world_size)),
        )


def launched_externally(environ: Mapping[str, str] | None = None) -> bool:
    """True when this process was started by torchrun (or another launcher) as one worker."""
    env = os.environ if environ is None else environ
    return "TORCHELASTIC_RUN_ID" in env or ("RANK" in env and "WORLD_SIZE" in env)


def node_address(environ: Mapping[str, str] | None = None) -> str | None:
    """The local address this process reaches the job's store (MASTER_ADDR) from.

    That is the address the other nodes know this one by, so it tells the nodes of a run
    apart where host names do not (containers, network namespaces). None without a job
    store. The route is looked up with a UDP socket's connect: no packet is sent.
    """
    env = os.environ if environ is None else environ
    host, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT", "0")
    if not host:
        return None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, int(port or 0), type=socket.SOCK_DGRAM
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.connect(address)
            return str(probe.getsockname()[0])
    except (OSError, ValueError):
        return None


# Who this process's parent was when the module was first imported here, for workers not
# started by multiprocessing (an external torchrun's Popen). Kept with our own pid: a child
# forked later inherits this module's state, and must not compare against its grandparent.
_IMPORTED_BY = (os.getpid(), os.getppid())


def starting_parent() -> int | None:
    """The pid of the process that started this one, as known from the start; None if unknown.

    multiprocessing hands its children their parent's pid (spawn passes it on the command
    line), so it is exact even when the parent died before this process got going. Otherwise
    the parent seen when this module was imported is the earliest one on record.
    """
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid is not None:
        return parent.pid
    pid, ppid = _IMPORTED_BY
    return ppid if pid == os.getpid() else None


def parent_is_gone(starting: int | None, current: int) -> bool:
    """Whether the parent that started this process has died (it was re-parented).

    A process whose parent dies is adopted by pid 1 or by a sub-reaper, so its parent pid
    changes. Comparing with pid 1 instead would be wrong where the parent itself is pid 1
    (the command as a container's init, `unshare --pid --fork`): every worker would exit.
    With no starting parent on record nothing can be told, and the process goes on.
    """
    return starting is not None and current != starting


def exit_with_parent() -> None:
    """Have the kernel kill this worker when the process that started it dies (Linux).

    The launcher stops its workers on every exit it sees; SIGKILL (kill -9, the OOM killer)
    it cannot see. Without this, its workers would be re-parented and go on: finishing a run
    nobody waits for, or waiting forever in a collective for a peer that is gone.
    """
    if not sys.platform.startswith("linux"):
        return

    pr_set_pdeathsig = 1  # from <sys/prctl.h>
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl here: keep the launcher's own clean-up only
        return
    # The parent may have died before the request, and then the kernel will never tell.
    if parent_is_gone(starting_parent(), os.getppid()):
        os._exit(1)
