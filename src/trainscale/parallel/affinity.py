"""CPU worker plans: how many threads each worker gets and which cores it is pinned to.

Oversubscription (more busy threads than cores) is the classic way parallel CPU training ends
up slower than serial: threads preempt each other, caches are thrashed, and the synchronous
all-reduce waits for the unluckiest rank. `plan_cpu` therefore refuses any plan whose
``workers x threads_per_worker`` exceeds the cores given to the run, or whose pinned core sets
overlap, unless the caller explicitly allows it (useful only to *measure* the slowdown).

Affinity modes:

- ``none``: no pinning; the OS scheduler places the workers' threads.
- ``compact``: worker ``i`` gets ``t`` consecutive cores, ``available[i*t:(i+1)*t]``, so a
  worker's threads share caches (and, on NUMA machines, usually one memory node).
- ``spread``: workers are spread over the machine. With a NUMA map of more than one node,
  worker ``i`` goes to node ``i mod num_nodes`` and takes the next ``t`` free cores of that
  node, so each worker's threads and memory stay on one node while the workers share the
  nodes' memory bandwidth. Without a NUMA map, worker ``i`` takes every ``workers``-th core,
  ``available[i::workers][:t]`` (OpenMP's ``spread`` / Intel's ``scatter``), so its threads are
  spaced apart across the package; this is the contrast to ``compact`` that the classic
  affinity studies measure.
- explicit: ``"0,1;2,3"`` (ranges ``"0-3;4-7"`` allowed) gives one core set per worker.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from trainscale.config.suggest import did_you_mean
from trainscale.errors import ConfigError
from trainscale.hardware.cpu_quota import cpu_quota
from trainscale.hardware.cpulist import format_cpulist, parse_cpulist
from trainscale.hardware.facts import usable_cores

AFFINITY_MODES = ("none", "compact", "spread")
"""Named affinity modes; anything else must be an explicit list of core sets."""


@dataclass(frozen=True)
class CpuPlan:
    """A resolved CPU plan: worker count, threads per worker, and each worker's cores."""

    workers: int
    """Number of worker processes."""
    threads_per_worker: int
    """Intra-op threads each worker sets with ``torch.set_num_threads``."""
    core_sets: tuple[tuple[int, ...], ...] | None
    """Cores of worker ``i`` at index ``i``; None when the workers are not pinned."""
    affinity: str
    """'none', 'compact', 'spread' or 'explicit'."""
    available_cores: tuple[int, ...]
    """The cores the plan was made for (sorted)."""
    oversubscribed: bool
    """True when threads outnumber cores: ``workers*threads`` > available cores, core sets
    overlap, or a worker has fewer cores than threads."""

    def describe(self) -> str:
        """One line for logs and reports.

        E.g. ``"2 workers x 1 thread, pinned compact: [0] [1]"``.
        """
        text = f"{_count(self.workers, 'worker')} x {_count(self.threads_per_worker, 'thread')}, "
        if self.core_sets is None:
            text += f"not pinned ({_count(len(self.available_cores), 'core')} available)"
        else:
            sets = " ".join(f"[{_format_set(cores)}]" for cores in self.core_sets)
            text += f"pinned {self.affinity}: {sets}"
        if self.oversubscribed:
            text += " (oversubscribed)"
        return text


def parse_affinity(text: str) -> str | list[list[int]]:
    """Parse an ``--affinity`` value.

    Returns ``'none'``, ``'compact'`` or ``'spread'`` (case-insensitive), or for explicit sets
    such as ``"0,1;2,3"`` or ``"0-3;4-7"`` a list of core lists, one per worker in order.
    Empty sets, repeated cores within a set and anything that is not a core number or range
    raise `ConfigError` naming the offending text. Whether the cores exist is checked later,
    by `plan_cpu`, against the cores available to the run.
    """
    stripped = text.strip()
    if stripped.lower() in AFFINITY_MODES:
        return stripped.lower()
    if not stripped:
        raise ConfigError(
            "empty --affinity; use none, compact, spread, or core sets like '0,1;2,3'"
        )
    if not any(char.isdigit() for char in stripped):
        raise ConfigError(
            f"unknown --affinity {stripped!r}{did_you_mean(stripped.lower(), AFFINITY_MODES)}; "
            "use none, compact, spread, "
            "or core sets like '0,1;2,3' (one set per worker)"
        )
    sets: list[list[int]] = []
    for position, part in enumerate(stripped.split(";"), start=1):
        if not part.strip():
            raise ConfigError(
                f"--affinity {stripped!r}: core set {position} is empty; "
                "give one non-empty set per worker, separated by ';'"
            )
        try:
            sets.append(parse_cpulist(part))
        except ConfigError as error:
            raise ConfigError(f"--affinity {stripped!r}, core set {position}: {error}") from None
    return sets


def plan_cpu(
    workers: int,
    threads_per_worker: int | None,
    affinity: str | Sequence[Sequence[int]],
    available_cores: Sequence[int] | None = None,
    allow_oversubscribe: bool = False,
    numa_nodes: Sequence[Sequence[int]] | None = None,
) -> CpuPlan:
    """Resolve workers, threads and affinity into a `CpuPlan`, refusing oversubscription.

    ``available_cores`` defaults to this process's affinity mask. ``threads_per_worker``
    defaults to ``max(1, cores // workers)``, or for explicit core sets to the size of the
    smallest set (so no worker runs more threads than it has cores). ``affinity`` is a mode
    name, an explicit string such as ``"0,1;2,3"``, or a list of core lists. ``numa_nodes``
    (one core list per node, e.g. ``[n["cpus"] for n in read_numa_nodes()]`` from
    `trainscale.hardware.facts`) only shapes ``spread``; it is a parameter, not read here, so
    plans are pure and testable.

    Raises `ConfigError` for invalid counts or cores, and for plans that put more threads than
    cores on the machine (or on a worker's cores) unless ``allow_oversubscribe`` is true; then
    ``compact``/``spread`` wrap around the available cores and the plan is marked
    ``oversubscribed``.
    """
    _check_count(workers, "--workers")
    if threads_per_worker is not None:
        _check_count(threads_per_worker, "--threads-per-worker")
    available = _resolve_available(available_cores)
    mode: str | list[list[int]] = (
        parse_affinity(affinity) if isinstance(affinity, str) else _check_sets(affinity)
    )

    if not isinstance(mode, str):
        return _plan_explicit(workers, threads_per_worker, mode, available, allow_oversubscribe)

    threads = (
        threads_per_worker
        if threads_per_worker is not None
        else _default_threads(len(available), workers)
    )
    total_over = workers * threads > len(available)
    if total_over and not allow_oversubscribe:
        raise ConfigError(oversubscription_message(workers, threads, len(available)))

    if mode == "none":
        core_sets = None
        over = total_over
    elif mode == "compact":
        core_sets = _compact(workers, threads, available)
        over = total_over
    else:
        nodes = _usable_nodes(numa_nodes, available)
        if len(nodes) > 1:
            core_sets, node_over = _spread_numa(workers, threads, nodes, allow_oversubscribe)
            over = total_over or node_over
        else:
            core_sets = _spread_strided(workers, threads, available)
            over = total_over
    return CpuPlan(
        workers=workers,
        threads_per_worker=threads,
        core_sets=core_sets,
        affinity=mode,
        available_cores=available,
        oversubscribed=over,
    )


def pin_current_process(cores: Sequence[int]) -> None:
    """Pin the calling process (and the threads it starts afterwards) to ``cores``.

    Call it in each worker before torch creates its thread pool: threads inherit the mask
    when they are created. Raises `ConfigError` when the OS has no affinity call or refuses
    the set (cores offline or outside this process's cgroup/cpuset).
    """
    wanted = list(cores)
    if not wanted:
        raise ConfigError("cannot pin a process to an empty core set")
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError(
            "CPU pinning is not supported on this operating system; use --affinity none"
        )
    try:
        os.sched_setaffinity(0, wanted)
    except (OSError, ValueError, OverflowError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise ConfigError(
            f"the OS refused to pin this process to cores {_format_set(wanted)} ({reason}); "
            f"cores available to it: {format_cpulist(usable_cores())}"
        ) from None
    _pin_other_threads(wanted)


def _pin_other_threads(cores: list[int]) -> None:
    """Pin the threads the process already runs besides this one: sched_setaffinity(0)
    pins the calling thread alone, and a library imported before (numpy's OpenBLAS starts
    its pool on import) would keep computing on every core outside the worker's set."""
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:  # no procfs: only the calling thread could be pinned
        return
    for thread in threads:
        # A thread that ended meanwhile, or one the OS will not move, keeps its own mask.
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(thread), cores)


# --- helpers ------------------------------------------------------------------------------


def _quota_note() -> str:
    """Why fewer cores are available than the mask holds, where a cgroup CPU quota is why."""
    quota = cpu_quota()
    if quota is None:
        return ""
    return f" (a cgroup CPU quota of {quota:g} cores' time: the usable cores are those it pays for)"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _format_set(cores: Sequence[int]) -> str:
    """A core set as written for people: ranges when consecutive, e.g. ``0-3`` or ``0,2,4``."""
    return format_cpulist(cores)


def _is_int(value: object) -> bool:
    # bool is an int subclass, but "--workers True" is a bug, not a count.
    return isinstance(value, int) and not isinstance(value, bool)


def _check_count(value: object, option: str) -> None:
    if not _is_int(value) or value < 1:  # type: ignore[operator]
        raise ConfigError(f"{option} must be a whole number >= 1, got {value!r}")


def _resolve_available(available_cores: Sequence[int] | None) -> tuple[int, ...]:
    cores = usable_cores() if available_cores is None else list(available_cores)
    for core in cores:
        if not _is_int(core) or core < 0:
            raise ConfigError(f"invalid available core {core!r}; cores are numbers >= 0")
    if not cores:
        raise ConfigError("no CPU cores are available to this run")
    return tuple(sorted(set(cores)))


def _default_threads(num_cores: int, workers: int) -> int:
    return max(1, num_cores // workers)


def oversubscription_message(
    workers: int,
    threads: int,
    num_cores: int,
    consequence: str = "parallel training runs slower than serial",
) -> str:
    """The one line that refuses ``workers x threads`` on ``num_cores`` cores (shared by
    every command that starts workers, so they all say it the same way)."""
    fits = num_cores // workers
    advice = f"use --threads-per-worker {fits}" if fits >= 1 else f"use --workers {num_cores}"
    return (
        f"{_count(workers, 'worker')} x {_count(threads, 'thread')} = "
        f"{_count(workers * threads, 'thread')} on {_count(num_cores, 'core')} oversubscribes "
        f"this machine (threads would fight for cores and {consequence}); {advice} or pass "
        "--allow-oversubscribe"
    )


def _dedupe(cores: Sequence[int]) -> tuple[int, ...]:
    # When wrapping around, a worker with more threads than cores would list a core twice;
    # an affinity mask is a set, so keep the first occurrence.
    return tuple(dict.fromkeys(cores))


def _compact(workers: int, threads: int, available: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    n = len(available)
    return tuple(
        _dedupe([available[(i * threads + j) % n] for j in range(threads)]) for i in range(workers)
    )


def _spread_strided(
    workers: int, threads: int, available: tuple[int, ...]
) -> tuple[tuple[int, ...], ...]:
    # Equals available[i::workers][:threads] whenever workers*threads <= cores; the modulo
    # only matters when oversubscription was allowed.
    n = len(available)
    return tuple(
        _dedupe([available[(i + k * workers) % n] for k in range(threads)]) for i in range(workers)
    )


def _usable_nodes(
    numa_nodes: Sequence[Sequence[int]] | None, available: tuple[int, ...]
) -> list[tuple[int, ...]]:
    """NUMA nodes restricted to the available cores, dropping nodes left without cores."""
    if not numa_nodes:
        return []
    allowed = set(available)
    nodes = [tuple(sorted(set(node) & allowed)) for node in numa_nodes]
    return [node for node in nodes if node]


def _spread_numa(
    workers: int, threads: int, nodes: list[tuple[int, ...]], allow_oversubscribe: bool
) -> tuple[tuple[tuple[int, ...], ...], bool]:
    """Round-robin workers over NUMA nodes; compact within a node. Returns (sets, over)."""
    placed_on = [i % len(nodes) for i in range(workers)]
    over = False
    for index, node in enumerate(nodes):
        needed = placed_on.count(index) * threads
        if needed > len(node):
            if not allow_oversubscribe:
                raise ConfigError(
                    f"spread affinity puts {_count(placed_on.count(index), 'worker')} x "
                    f"{_count(threads, 'thread')} on the NUMA node with cores "
                    f"{_format_set(node)}, which has only {_count(len(node), 'core')}; "
                    "use fewer threads per worker, compact affinity, or pass "
                    "--allow-oversubscribe"
                )
            over = True
    next_slot = [0] * len(nodes)
    sets = []
    for node_index in placed_on:
        node = nodes[node_index]
        start = next_slot[node_index]
        sets.append(_dedupe([node[(start + j) % len(node)] for j in range(threads)]))
        next_slot[node_index] += threads
    return tuple(sets), over


def _check_sets(sets: Sequence[Sequence[int]]) -> list[list[int]]:
    """Validate core sets given as Python lists (the string form goes through parse_affinity)."""
    checked: list[list[int]] = []
    for position, cores in enumerate(sets, start=1):
        if isinstance(cores, (str, bytes)) or not isinstance(cores, Sequence):
            raise ConfigError(f"core set {position} must be a list of core numbers, got {cores!r}")
        if not cores:
            raise ConfigError(f"core set {position} is empty; give one non-empty set per worker")
        for core in cores:
            if not _is_int(core) or core < 0:
                raise ConfigError(f"core set {position}: {core!r} is not a core number")
        if len(set(cores)) != len(cores):
            repeated = next(core for core in cores if list(cores).count(core) > 1)
            raise ConfigError(f"core set {position}: core {repeated} is listed twice")
        checked.append(list(cores))
    return checked


def _plan_explicit(
    workers: int,
    threads_per_worker: int | None,
    sets: list[list[int]],
    available: tuple[int, ...],
    allow_oversubscribe: bool,
) -> CpuPlan:
    if len(sets) != workers:
        raise ConfigError(
            f"--affinity gives {_count(len(sets), 'core set')} but there "
            f"{'is' if workers == 1 else 'are'} {_count(workers, 'worker')}; "
            "give exactly one set per worker, separated by ';'"
        )
    allowed = set(available)
    for position, cores in enumerate(sets, start=1):
        for core in cores:
            if core not in allowed:
                raise ConfigError(
                    f"core {core} in --affinity set {position} is not available to this run; "
                    f"available cores: {format_cpulist(available)}{_quota_note()}"
                )
    threads = (
        threads_per_worker if threads_per_worker is not None else min(len(cores) for cores in sets)
    )

    problems: list[str] = []
    if workers * threads > len(available):
        problems.append(oversubscription_message(workers, threads, len(available)))
    owner: dict[int, int] = {}
    for position, cores in enumerate(sets, start=1):
        shared = [core for core in cores if core in owner]
        if shared:
            problems.append(
                f"--affinity core sets {owner[shared[0]]} and {position} both contain core "
                f"{shared[0]}; overlapping sets make workers fight for cores. Give each worker "
                "its own cores or pass --allow-oversubscribe"
            )
        for core in cores:
            owner.setdefault(core, position)
        if threads > len(cores):
            problems.append(
                f"{_count(threads, 'thread')} per worker on --affinity set {position} "
                f"({_format_set(cores)}, {_count(len(cores), 'core')}) oversubscribes it; "
                f"use --threads-per-worker {len(cores)} or pass --allow-oversubscribe"
            )
    if problems and not allow_oversubscribe:
        raise ConfigError(problems[0])
    return CpuPlan(
        workers=workers,
        threads_per_worker=threads,
        core_sets=tuple(tuple(cores) for cores in sets),
        affinity="explicit",
        available_cores=available,
        oversubscribed=bool(problems),
    )
