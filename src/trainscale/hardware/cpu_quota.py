"""A CPU time quota on this process's cgroup: `docker run --cpus 4`, a Kubernetes CPU limit,
a systemd CPUQuota. Such a quota leaves the affinity mask alone (all 64 cores of the host
stay usable) while it allows 4 cores' worth of time: a run planned on the mask would put 64
threads on 4 cores' time, oversubscribed without a word. `usable_cores` (hardware/facts.py)
counts the cores the quota pays for.

Read by hand, since no maintained library reads both cgroup versions' files: cgroup v2's
`cpu.max` ("QUOTA PERIOD", or "max PERIOD" for none) and cgroup v1's `cpu.cfs_quota_us`
(-1 for none) over `cpu.cfs_period_us`, in this process's cgroup and every cgroup above it
(a parent's limit binds its children). Unreadable or absent files mean no quota.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

PROC_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def cpu_quota(proc_cgroup: Path = PROC_CGROUP, root: Path = CGROUP_ROOT) -> float | None:
    """The CPUs' worth of time the tightest quota over this process allows (e.g. 4.0, 0.5);
    None where there is none, or where it cannot be read."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and not controllers:  # the v2 hierarchy (or v1's hybrid half)
            for mount in (root, root / "unified"):
                limits += _limits(mount, path, _v2_limit)
        elif "cpu" in controllers.split(","):
            for mount in dict.fromkeys((root / controllers, root / "cpu")):
                limits += _limits(mount, path, _v1_limit)
    return min(limits) if limits else None


def _limits(mount: Path, path: str, read: Callable[[Path], float | None]) -> list[float]:
    """The limits `read(folder)` finds in the cgroup at `path` and each one above it."""
    folder = mount / path.lstrip("/")
    found = []
    while True:
        limit = read(folder)
        if limit is not None:
            found.append(limit)
        if folder == mount or mount not in folder.parents:
            return found
        folder = folder.parent


def _v2_limit(folder: Path) -> float | None:
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def _v1_limit(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period
