"""The ladder of settings `trainscale bench` measures, and the order of its rounds.

Every rung trains the same workload at the same global batch size, so the optimisation is
the same and speedups compare like with like. Throughput rungs train a fixed number of
steps in short rounds, every rung once a round, in an order rotated from round to round
(`rotation`); then the fastest sound setting trains the full recipe to report accuracy and
time to target (accuracy is a property of the optimisation, which the rungs share).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from trainscale.config.options import THREADS_TORCH_DEFAULT, RunOptions


@dataclass(frozen=True)
class Rung:
    """One setting of the ladder."""

    name: str
    options: RunOptions
    cores: int
    """Cores the setting is given (for efficiency = speedup / cores)."""
    note: str = ""
    pitfall: bool = False
    pitfall_of: str | None = None
    """For a pitfall, the sound rung it is the naive version of (compared with it, paired)."""


@dataclass(frozen=True)
class Skipped:
    """A rung that cannot run on this machine, and why."""

    name: str
    reason: str


def plan_ladder(
    base: RunOptions, num_cores: int, bf16_native: bool, num_gpus: int
) -> list[Rung | Skipped]:
    """The settings to compare on a machine with `num_cores` usable cores."""

    def opts(**changes: Any) -> RunOptions:
        return base.with_(**changes)

    ladder: list[Rung | Skipped] = [
        Rung(
            "serial 1 core (baseline)",
            opts(workers=1, threads_per_worker=1, affinity="compact"),
            cores=1,
        ),
    ]
    if num_cores > 1:
        ladder.append(
            Rung(
                f"1 process, {num_cores} threads",
                opts(workers=1, threads_per_worker=num_cores, affinity="compact"),
                cores=num_cores,
            )
        )
        pinned = Rung(
            f"{num_cores} pinned workers x 1 thread",
            opts(workers=num_cores, threads_per_worker=1, affinity="compact"),
            cores=num_cores,
        )
        ladder.append(pinned)
    best_cpu = ladder[-1]
    assert isinstance(best_cpu, Rung)  # the serial rung or the pinned one: none skipped yet
    if bf16_native:
        ladder.append(
            Rung(
                f"{best_cpu.name}, bf16",
                best_cpu.options.with_(precision="bf16"),
                cores=best_cpu.cores,
            )
        )
    else:
        ladder.append(
            Skipped(
                "bf16 autocast",
                "this CPU has no native bf16 (AMX or "
                "AVX512-BF16): bf16 is emulated and slower than fp32 here",
            )
        )
    if num_cores > 1:
        ladder.append(
            Rung(
                naive_name(base.parallel.framework, num_cores),
                opts(
                    workers=num_cores,
                    threads_per_worker=THREADS_TORCH_DEFAULT,
                    affinity="none",
                    allow_oversubscribe=True,
                ),
                cores=num_cores,
                note="the oversubscription pitfall",
                pitfall=True,
                pitfall_of=pinned.name,
            )
        )
    if num_gpus:
        ladder.append(Skipped("1 GPU", "GPU training is not supported by this version"))
    else:
        ladder.append(Skipped("1 GPU", "no GPU on this machine"))
    return ladder


def naive_name(framework: str, num_cores: int) -> str:
    """The pitfall rung's name: each framework's data parallelism, left to its own threads."""
    if framework == "pytorch":
        return f"naive DDP: {num_cores} unpinned workers, torch-default threads"
    return f"naive: {num_cores} unpinned {framework} workers, {framework}-default threads"


T = TypeVar("T")


def rotation(items: Sequence[T], rounds: int) -> list[list[T]]:
    """The order of each round: round r starts at item r mod n and wraps around (A B C,
    B C A, C A B, ...), so that no setting always runs first, or always right after the
    same other one, while the machine's speed drifts."""
    n = len(items)
    if n == 0:
        return [[] for _ in range(rounds)]
    return [[*items[r % n :], *items[: r % n]] for r in range(rounds)]
