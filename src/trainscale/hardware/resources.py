"""What this machine can hold: memory, and how many worker processes it can start.

The parent checks a run against these limits before any worker starts, so a run that cannot
fit costs one line (exit status 2, nothing stored) instead of dying in a worker of a
MemoryError, the kernel's OOM killer or "too many open files". The limits that are product
decisions are the named constants below; docs/methodology.md lists them.
"""

from __future__ import annotations

import resource
import sys

import psutil

from trainscale.errors import ConfigError

MIB = 1024 * 1024
GIB = 1024 * MIB

MAX_WORKERS_PER_CORE = 8
"""Most worker processes per usable core, even with --allow-oversubscribe. Oversubscription
is allowed so that its cost can be measured, and a few processes per core show it; beyond
this the run times the scheduler time-slicing dozens of torch processes (each spends
seconds of CPU importing torch before the first step) and collectives start to time out."""

FDS_PER_WORKER = 6
"""Open files one worker costs. Measured on Linux: the launching process holds 5 per worker
(pipes and its socket to the rendezvous store) and each worker 3 to 4 per peer (gloo's full
mesh of sockets); both have the same limit, so the larger share sets it, rounded up."""

FDS_RESERVED = 64
"""Descriptors kept for everything else a process opens: libraries, the store, logs."""

BYTES_PER_PARAMETER = 4
"""fp32 master weights (bf16 autocast computes in bf16 but keeps fp32 parameters)."""

STATE_COPIES = 4
"""Model state per parameter: the weights, their gradients and Adam's two moments (SGD with
momentum keeps one fewer; the floor is for the largest of the recipes' optimizers)."""

WORKER_PROCESS_BYTES = 150 * MIB
"""Memory of one worker before it holds data or a model: a Python process with torch
imported (about 145 MiB of its own pages, measured on Linux with torch 2 for the CPU)."""


def format_bytes(size: float) -> str:
    """A size for people: '18.6 GiB', '150 MiB', '4.0 KiB'."""
    for unit, scale in (("TiB", 1024 * GIB), ("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"
    return f"{size:.0f} B"


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far, in bytes. (getrusage gives kilobytes on
    Linux and bytes on macOS.)"""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def available_memory_bytes() -> int:
    """Memory that can be given to new allocations without swapping (psutil's 'available').

    A container's cgroup limit is not read: where it is lower, a run may still be killed.
    """
    return int(psutil.virtual_memory().available)


def open_file_limit() -> int | None:
    """This process's soft limit on open files (workers inherit it); None when unlimited or
    unknown (no `resource` module, as on Windows)."""
    try:
        import resource  # noqa: PLC0415 (a Unix module: Windows has none)
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def check_worker_count(
    workers: int, num_cores: int, fd_limit: int | None, option: str = "--workers"
) -> None:
    """ConfigError naming the limit when `workers` processes cannot be started here.

    Two limits: `MAX_WORKERS_PER_CORE` x the usable cores (allowed oversubscription has a
    ceiling), and the open-file limit (`FDS_PER_WORKER` descriptors a worker, plus
    `FDS_RESERVED`), which otherwise ends the launch in "too many open files".
    """
    cores_cap = MAX_WORKERS_PER_CORE * max(1, num_cores)
    if workers > cores_cap:
        raise ConfigError(
            f"{option} {workers} is more worker processes than this machine can run: at most "
            f"{cores_cap} on {num_cores} usable core{'s' if num_cores != 1 else ''} "
            f"({MAX_WORKERS_PER_CORE} per core, even with --allow-oversubscribe)"
        )
    if fd_limit is not None:
        needed = FDS_RESERVED + FDS_PER_WORKER * workers
        if needed > fd_limit:
            most = max(1, (fd_limit - FDS_RESERVED) // FDS_PER_WORKER)
            raise ConfigError(
                f"{option} {workers} needs about {needed} open files ({FDS_PER_WORKER} per "
                f"worker) but this process may open {fd_limit} (ulimit -n); use {option} "
                f"{most} or fewer, or raise the limit"
            )


def check_memory(
    needed_bytes: int,
    what: str,
    advice: str,
    available: int | None = None,
    where: str = "on this machine",
) -> None:
    """ConfigError when `needed_bytes` exceed the memory available (`where`, host memory by
    default): '`what` needs about X, more than the Y of memory available; `advice`'."""
    available = available_memory_bytes() if available is None else available
    if needed_bytes > available:
        raise ConfigError(
            f"{what} needs about {format_bytes(needed_bytes)} of memory, more than the "
            f"{format_bytes(available)} available {where}; {advice}"
        )
