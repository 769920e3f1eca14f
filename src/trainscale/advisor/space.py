"""The settings `trainscale recommend` searches: workers x threads x affinity x precision x batch
for a workload, and on a machine with GPUs its GPU settings too (1 GPU, and all of them with a
worker each) x precision x batch; workers x threads x affinity for a user's own script, which
decides its precision and batch itself.

Built from this machine's usable cores, so every candidate fits the machine: workers x
threads never exceeds the cores (oversubscription only ever loses, see
parallel/affinity.py), affinity modes that pin to identical core sets are kept once (on a
machine with one NUMA node and one worker, compact and spread are the same plan), and bf16
is only tried where the CPU computes it natively (elsewhere it is emulated and slower).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.hardware.precision_choice import gpus_bf16_native
from trainscale.parallel.affinity import plan_cpu

AFFINITIES = ("compact", "spread")
BATCH_MULTIPLIERS = (1, 2)
"""Per-worker batch sizes tried, as multiples of the workload's recipe batch size."""

BF16_SKIP_REASON = (
    "bf16 skipped: this CPU has no native bf16 (AMX or AVX512-BF16), so bf16 is emulated "
    "and slower than fp32"
)


@dataclass(frozen=True)
class Candidate:
    """One setting of the search: how many workers, threads, where, how precise, how big."""

    workers: int
    threads_per_worker: int
    affinity: str
    precision: str | None
    """None: a script's, which it decides itself."""
    batch_size: int | None
    """Per-worker batch size; None: a script's, which it decides itself."""
    core_sets: tuple[tuple[int, ...], ...] = ()
    """Cores each worker is pinned to, as planned on this machine (for dedup and display)."""
    gpus: int = 0
    """GPUs it trains on, a worker each, the host's cores shared among them (0: the CPU)."""
    more_workers_than_cores: bool = False
    """A GPU setting whose GPUs outnumber the host's cores: a thread each, allowed to
    oversubscribe the host (as the bench's GPU rungs are), since the GPUs compute."""

    @property
    def global_batch_size(self) -> int | None:
        """Samples per step over all workers; None for a script (known once it ran)."""
        return None if self.batch_size is None else self.workers * self.batch_size

    @property
    def cores(self) -> int:
        """Cores the candidate uses (workers x threads)."""
        return self.workers * self.threads_per_worker

    @property
    def label(self) -> str:
        """A short, unique name, e.g. '2w x 1t compact fp32 b64' ('2w x 1t compact' for a
        script, '1 GPU bf16 b128' on a GPU)."""
        if self.gpus:
            plural = "s" if self.gpus > 1 else ""
            return f"{self.gpus} GPU{plural} {self.precision} b{self.batch_size}"
        placement = f"{self.workers}w x {self.threads_per_worker}t {self.affinity}"
        if self.precision is None or self.batch_size is None:
            return placement
        return f"{placement} {self.precision} b{self.batch_size}"

    def options(self, base: RunOptions) -> RunOptions:
        """`base` with this candidate's settings (the per-worker batch replaces any global one;
        a script's candidate sets only the placement)."""
        placement = base.with_(
            workers=self.workers,
            threads_per_worker=self.threads_per_worker,
            affinity=self.affinity,
            allow_oversubscribe=self.more_workers_than_cores,
        )
        if self.gpus:
            placement = placement.with_(device="cuda")
        if self.precision is None or self.batch_size is None:
            return placement
        return placement.with_(
            precision=self.precision, batch_size=self.batch_size, global_batch_size=None
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "workers": self.workers,
            "threads_per_worker": self.threads_per_worker,
            "affinity": self.affinity,
            "precision": self.precision,
            "batch_size": self.batch_size,
            "global_batch_size": self.global_batch_size,
            "core_sets": [list(s) for s in self.core_sets],
            "gpus": self.gpus,
        }


@dataclass(frozen=True)
class Space:
    """The candidates, the baseline among them, and what was left out and why."""

    candidates: list[Candidate]
    baseline: Candidate
    """Serial: 1 worker x 1 thread, fp32, the recipe's batch. Speedups are against it."""
    skipped: list[str]
    """Axes or values left out on this machine, each with its reason."""
    duplicates: list[tuple[str, str]]
    """(dropped label, kept label): same workers, threads and core sets."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidates": [c.to_dict() for c in self.candidates],
            "baseline": self.baseline.label,
            "skipped": list(self.skipped),
            "duplicates": [list(d) for d in self.duplicates],
        }


def worker_counts(num_cores: int) -> list[int]:
    """Worker counts to try: the divisors of the core count and the powers of two up to it.

    Divisors use every core with equal shares; powers of two are the counts people try
    first and the ones the classic scaling studies report.
    """
    if num_cores < 1:
        raise ConfigError("no CPU cores are available to search over")
    divisors = {n for n in range(1, num_cores + 1) if num_cores % n == 0}
    powers = {1 << k for k in range(num_cores.bit_length()) if 1 << k <= num_cores}
    return sorted(divisors | powers)


def thread_counts(num_cores: int, workers: int) -> list[int]:
    """Threads per worker to try: powers of two and the largest count that fits, so that
    workers x threads <= cores."""
    limit = num_cores // workers
    values = {1 << k for k in range(limit.bit_length()) if 1 << k <= limit}
    if limit >= 1:
        values.add(limit)
    return sorted(values)


def build_space(
    recipe_batch_size: int,
    cores: Sequence[int],
    bf16_native: bool,
    numa_nodes: Sequence[Sequence[int]] | None = None,
    batch_multipliers: Sequence[int] = BATCH_MULTIPLIERS,
    max_workers: int | None = None,
    num_gpus: int = 0,
    cuda_bf16: bool = False,
) -> Space:
    """Every candidate for a machine with `cores` (usable core ids), the NUMA map given and
    `num_gpus` GPUs (`cuda_bf16`: they compute bf16 natively).

    Pure: the machine facts are parameters (see `machine_space` for this machine's).
    """
    if recipe_batch_size < 1:
        raise ConfigError(f"batch size must be positive, got {recipe_batch_size}")
    if not batch_multipliers or any(
        not isinstance(m, int) or isinstance(m, bool) or m < 1 for m in batch_multipliers
    ):
        raise ConfigError(
            f"batch multipliers must be whole numbers >= 1, got {list(batch_multipliers)}"
        )
    placed = placements(cores, numa_nodes, max_workers)
    skipped = list(placed.skipped)
    precisions = ["fp32"]
    if bf16_native:
        precisions.append("bf16")
    else:
        skipped.insert(0, BF16_SKIP_REASON)
    candidates = [
        Candidate(workers, threads, affinity, precision, recipe_batch_size * multiplier, sets)
        for workers, threads, affinity, sets in placed.placements
        for precision in precisions
        for multiplier in dict.fromkeys(batch_multipliers)
    ]
    gpu, gpu_skipped = gpu_candidates(
        len(set(cores)),
        num_gpus,
        cuda_bf16,
        [recipe_batch_size * m for m in batch_multipliers],
        max_workers,
    )
    candidates += gpu
    skipped += gpu_skipped
    # The serial reference: the setting every speedup is against. It is a candidate too
    # whenever the recipe's own batch (multiplier 1) is searched.
    first = (min(cores),)
    baseline = Candidate(1, 1, "compact", "fp32", recipe_batch_size, (first,))
    return Space(candidates, baseline, skipped, placed.duplicates)


def gpu_candidates(
    num_cores: int,
    num_gpus: int,
    cuda_bf16: bool,
    batch_sizes: Sequence[int],
    max_workers: int | None = None,
) -> tuple[list[Candidate], list[str]]:
    """The GPU settings and what was left out: 1 GPU, and every GPU (a worker each, at most
    `max_workers`) where there are several, in fp32 and, where the GPUs compute it natively,
    bf16, at each per-worker batch size; the host's cores shared among the workers (they
    feed the GPUs; a thread each where the GPUs outnumber them). As the bench's GPU rungs
    (benchmark/ladder.py), and nothing on a machine without GPUs."""
    if num_gpus < 1:
        return [], []
    precisions = ["fp32", "bf16"] if cuda_bf16 else ["fp32"]
    skipped = [] if cuda_bf16 else ["GPU bf16 skipped: these GPUs have no native bf16"]
    most = num_gpus if max_workers is None else max(1, min(num_gpus, max_workers))
    if most < num_gpus:
        skipped.append(f"{num_gpus} GPUs skipped: --max-workers {max_workers} caps the workers")
    candidates = [
        Candidate(
            gpus,
            max(1, num_cores // gpus),
            "compact",
            precision,
            batch,
            gpus=gpus,
            more_workers_than_cores=gpus > num_cores,
        )
        for gpus in sorted({1, most})
        for precision in precisions
        for batch in dict.fromkeys(batch_sizes)
    ]
    return candidates, skipped


def script_space(
    cores: Sequence[int],
    numa_nodes: Sequence[Sequence[int]] | None = None,
    max_workers: int | None = None,
) -> Space:
    """Every candidate for a user's own script: workers x threads x affinity only. The
    script decides its precision and batch, so neither is an axis (None in each candidate),
    and the baseline is the serial 1-worker, 1-thread setting. Pure, as `build_space`."""
    placed = placements(cores, numa_nodes, max_workers)
    candidates = [
        Candidate(workers, threads, affinity, None, None, sets)
        for workers, threads, affinity, sets in placed.placements
    ]
    baseline = Candidate(1, 1, "compact", None, None, ((min(cores),),))
    return Space(candidates, baseline, list(placed.skipped), placed.duplicates)


@dataclass(frozen=True)
class Placements:
    """Where workers can go on a machine: (workers, threads, affinity, core sets) each."""

    placements: list[tuple[int, int, str, tuple[tuple[int, ...], ...]]]
    skipped: list[str]
    duplicates: list[tuple[str, str]]


def placements(
    cores: Sequence[int],
    numa_nodes: Sequence[Sequence[int]] | None = None,
    max_workers: int | None = None,
) -> Placements:
    """Workers x threads x affinity that fit `cores` without oversubscribing, each distinct
    pinning once (affinities that pin to the same core sets are listed as duplicates)."""
    available = sorted(set(cores))
    num_cores = len(available)
    skipped: list[str] = []
    counts = worker_counts(num_cores)
    if max_workers is not None:
        if max_workers < 1:
            raise ConfigError(f"--max-workers must be >= 1, got {max_workers}")
        left_out = [n for n in counts if n > max_workers]
        counts = [n for n in counts if n <= max_workers]
        if left_out:
            skipped.append(
                f"workers {', '.join(map(str, left_out))} skipped: above --max-workers "
                f"{max_workers}"
            )

    found: list[tuple[int, int, str, tuple[tuple[int, ...], ...]]] = []
    duplicates: list[tuple[str, str]] = []
    for workers in counts:
        for threads in thread_counts(num_cores, workers):
            seen: dict[tuple[tuple[int, ...], ...], str] = {}
            for affinity in AFFINITIES:
                try:
                    plan = plan_cpu(
                        workers, threads, affinity, available_cores=available, numa_nodes=numa_nodes
                    )
                except ConfigError as error:
                    skipped.append(f"{workers}w x {threads}t {affinity} skipped: {error}")
                    continue
                if plan.oversubscribed:  # cannot happen without allow_oversubscribe; be sure
                    continue
                sets = tuple(sorted(plan.core_sets or ()))
                if sets in seen:
                    duplicates.append(
                        (
                            f"{workers}w x {threads}t {affinity}",
                            f"{workers}w x {threads}t {seen[sets]}",
                        )
                    )
                    continue
                seen[sets] = affinity
                found.append((workers, threads, affinity, plan.core_sets or ()))
    return Placements(found, skipped, duplicates)


def machine_space(
    workload: str,
    batch_multipliers: Sequence[int] = BATCH_MULTIPLIERS,
    max_workers: int | None = None,
    env: dict[str, Any] | None = None,
    with_gpus: bool = True,
) -> Space:
    """The search space of `workload` on this machine (usable cores, NUMA map, bf16, GPUs;
    `with_gpus` False: the CPU's alone).

    `env` is `trainscale.hardware.facts.collect_environment()`'s dict, collected here when
    not given.
    """
    from trainscale.workloads import get_workload

    if env is None:
        from trainscale.hardware.facts import collect_environment

        env = collect_environment()
    gpus = env.get("gpus") or []
    return build_space(
        get_workload(workload).recipe.batch_size,
        env["usable_cores"],
        bool(env["bf16_native"]),
        numa_nodes=[node["cpus"] for node in env["numa_nodes"]] or None,
        batch_multipliers=batch_multipliers,
        max_workers=max_workers,
        num_gpus=len(gpus) if with_gpus else 0,
        cuda_bf16=gpus_bf16_native(gpus),
    )
