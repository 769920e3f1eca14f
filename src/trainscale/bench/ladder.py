"""The ladder of settings `trainscale bench` measures.

Every rung trains the same workload at the same global batch size, so the optimisation is
the same and speedups compare like with like. Throughput rungs train a fixed number of
steps; then the fastest sound setting trains the full recipe to report accuracy and time to
target (accuracy is a property of the optimisation, which the rungs share).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
        ladder.append(
            Rung(
                f"{num_cores} pinned workers x 1 thread",
                opts(workers=num_cores, threads_per_worker=1, affinity="compact"),
                cores=num_cores,
            )
        )
    best_cpu = ladder[-1]
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
                f"naive DDP: {num_cores} unpinned workers, torch-default threads",
                opts(
                    workers=num_cores,
                    threads_per_worker=THREADS_TORCH_DEFAULT,
                    affinity="none",
                    allow_oversubscribe=True,
                ),
                cores=num_cores,
                note="the oversubscription pitfall",
                pitfall=True,
            )
        )
    if num_gpus:
        ladder.append(Skipped("1 GPU", "GPU training is not supported by this version"))
    else:
        ladder.append(Skipped("1 GPU", "no GPU on this machine"))
    return ladder
