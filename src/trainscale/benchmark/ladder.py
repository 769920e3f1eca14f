"""The ladder of settings `trainscale bench` measures, and the order of its rounds.

On a machine with GPUs the ladder ends with GPU settings (1 GPU; N GPUs, one worker each),
measured in the same rounds as the CPU ones and compared, paired, with the fastest CPU
setting (`benchmark.table.gpu_lines`); the bench of a script has them too, in the script's
own precision.

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
from trainscale.frameworks import get_framework

SCRIPT_PRECISION = "the script decides its precision (it may autocast itself): no bf16 rung"
"""Why the bench of a script has no bf16 rung."""
SCRIPT_GPU_NOTE = "the script's own global batch and precision"
"""A script's GPU rung's note: the script decides both, on the GPU as on the CPU, so a
GPU rung compares the script as it is, not one recipe (`SAME_RECIPE_NOTE`)."""
SCRIPT_NCCL_NOTE = 'the script must form its process group over NCCL (init_process_group("nccl"))'
"""A script's multi-GPU rung's note: the script, not trainscale, forms its process group,
so the backend is its choice; gloo would carry the GPUs' gradients through the host."""


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
    gpus: int = 0
    """GPUs the setting trains on (0: a CPU setting). A GPU rung's speedup is not divided
    by its cores: it has no efficiency."""


@dataclass(frozen=True)
class Skipped:
    """A rung that cannot run on this machine, and why."""

    name: str
    reason: str


def plan_ladder(
    base: RunOptions,
    num_cores: int,
    bf16_native: bool,
    num_gpus: int,
    cuda_bf16: bool = False,
    script: bool = False,
) -> list[Rung | Skipped]:
    """The settings to compare on a machine with `num_cores` usable cores and `num_gpus`
    GPUs; `bf16_native` / `cuda_bf16` say whether the CPU / the GPUs compute bf16 natively.
    A `script` (the bench of a user's script) has the same settings, each in the script's own
    precision: the rungs set nothing the script decides, so it has no bf16 rung."""

    def opts(**changes: Any) -> RunOptions:
        return base.with_(**changes)

    # Data-parallel rungs train the same global batch as the others: as many workers as
    # split it evenly, up to one per core.
    global_batch = base.optimisation.global_batch_size
    workers = dividing_workers(num_cores, global_batch)
    fewer = uneven_note(workers, num_cores, global_batch, "core")

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
    if workers > 1:
        pinned = Rung(
            f"{workers} pinned workers x 1 thread",
            opts(workers=workers, threads_per_worker=1, affinity="compact"),
            cores=workers,
            note=fewer,
        )
        ladder.append(pinned)
    best_cpu = ladder[-1]
    assert isinstance(best_cpu, Rung)  # the serial rung or the pinned one: none skipped yet
    if script:
        ladder.append(Skipped("bf16 autocast", SCRIPT_PRECISION))
    elif bf16_native:
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
    if workers > 1:
        ladder.append(
            Rung(
                naive_name(base.parallel.framework, workers),
                opts(
                    workers=workers,
                    threads_per_worker=THREADS_TORCH_DEFAULT,
                    affinity="none",
                    allow_oversubscribe=True,
                ),
                cores=workers,
                note="the oversubscription pitfall",
                pitfall=True,
                pitfall_of=pinned.name,
            )
        )
    ladder += gpu_rungs(base, num_cores, num_gpus, cuda_bf16, script)
    return ladder


SAME_RECIPE_NOTE = "same recipe: the CPU rungs' global batch"
"""A GPU rung's note. A larger batch would keep a GPU busier, but it would change the
optimisation (the lr, the steps to a target): the bench compares one recipe on each
device, so its speedups say what the same training gains on the GPU."""


def gpu_rungs(
    base: RunOptions, num_cores: int, num_gpus: int, cuda_bf16: bool, script: bool = False
) -> list[Rung | Skipped]:
    """The GPU settings: 1 GPU, and N GPUs (one worker each, over NCCL) where there are
    several; each in fp32 and, where the GPUs compute it natively, bf16. Every one trains
    the CPU rungs' global batch (`SAME_RECIPE_NOTE`) with the bench's framework. A
    `script`'s are script runs on the GPUs, in the script's own batch and precision (no
    bf16 rung: `SCRIPT_PRECISION`)."""
    if not num_gpus:
        return [Skipped("1 GPU", "no GPU on this machine")]
    trains = get_framework(base.parallel.framework)
    not_here = trains.gpu_reason()
    if not_here:
        return [Skipped("1 GPU", not_here)]
    rungs: list[Rung | Skipped] = []
    global_batch = base.optimisation.global_batch_size
    most = dividing_workers(num_gpus, global_batch)
    if most < num_gpus:
        rungs.append(
            Skipped(
                f"{num_gpus} GPUs",
                uneven_note(most, num_gpus, global_batch, "GPU") + f": {most} GPUs instead",
            )
        )
    for workers in sorted({1, most}):
        comm = f"{trains.data_parallelism} over NCCL"
        name = "1 GPU" if workers == 1 else f"{workers} GPUs, {comm}"
        on_gpus = base.with_(
            device="cuda",
            workers=workers,
            # The host threads feed the GPUs: the cores shared among the workers.
            threads_per_worker=max(1, num_cores // workers),
            affinity="compact",
            allow_oversubscribe=workers > num_cores,
        )
        if script:
            # No precision set: a script run takes none (it keeps the script's own).
            note = SCRIPT_GPU_NOTE if workers == 1 else f"{SCRIPT_GPU_NOTE}; {SCRIPT_NCCL_NOTE}"
            rungs.append(Rung(name, on_gpus, num_cores, note, gpus=workers))
            rungs.append(Skipped(f"{name}, bf16", SCRIPT_PRECISION))
            continue
        fp32 = Rung(
            name,
            on_gpus.with_(precision="fp32"),
            cores=num_cores,
            note=SAME_RECIPE_NOTE,
            gpus=workers,
        )
        rungs.append(fp32)
        if cuda_bf16:
            bf16 = fp32.options.with_(precision="bf16")
            rungs.append(Rung(f"{name}, bf16", bf16, num_cores, SAME_RECIPE_NOTE, gpus=workers))
        else:
            reason = "this GPU has no native bf16 (before Ampere)"
            rungs.append(Skipped(f"{name}, bf16", reason))
    return rungs


def dividing_workers(most: int, global_batch: int | None) -> int:
    """The most workers, up to `most`, that split `global_batch` evenly (all of them when
    the batch is not fixed: a script's own)."""
    if not global_batch:
        return most
    return max(w for w in range(1, most + 1) if global_batch % w == 0)


def uneven_note(workers: int, available: int, global_batch: int | None, unit: str) -> str:
    """Why a data-parallel rung has fewer `workers` than the `available` cores or GPUs
    ('' when it has them all)."""
    if workers == available:
        return ""
    return (
        f"{workers} workers, not one per {unit}: the global batch {global_batch} does not "
        f"split evenly over {available}"
    )


def naive_name(framework: str, num_cores: int) -> str:
    """The pitfall rung's name: each framework's data parallelism, left to its own threads."""
    if framework == "pytorch":
        return f"naive DDP: {num_cores} unpinned workers, torch-default threads"
    return f"naive: {num_cores} unpinned {framework} workers, {framework}-default threads"


T = TypeVar("T")


def round_order(items: Sequence[T], round_index: int) -> list[T]:
    """The order of round `round_index`: it starts at item r mod n and wraps around (A B C,
    B C A, C A B, ...), so that no setting always runs first, or always right after the
    same other one, while the machine's speed drifts."""
    start = round_index % len(items) if items else 0
    return [*items[start:], *items[:start]]


def rotation(items: Sequence[T], rounds: int) -> list[list[T]]:
    """The order of each of `rounds` rounds (`round_order`)."""
    return [round_order(items, r) for r in range(rounds)]
