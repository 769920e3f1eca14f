"""A run's row in the store: created 'running' by whoever launches, completed by rank 0.

The parent creates the row before any worker starts (so a run that fails is stored as
failed); where no parent can (an external launcher, several nodes) rank 0's worker does.
Rank 0 writes the completed result in one transaction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from trainscale.config.options import RunConfig
from trainscale.config.script import ScriptRun
from trainscale.frameworks import get_framework, version
from trainscale.hardware import facts
from trainscale.hardware.contention import Contention
from trainscale.hardware.figures import RunDevices, hardware_figures_safe
from trainscale.results.run_result import RunResult
from trainscale.results.store import RunStore
from trainscale.train.script_summary import ScriptSummary
from trainscale.train.trainer import TrainOutcome
from trainscale.workloads.base import Workload


@dataclass(frozen=True)
class SweepSlot:
    """Where a run sits in a sweep: the sweep, its plan index and its repeat index."""

    sweep_id: str
    item: int
    repeat: int
    progress_file: str | None = None
    """Where the run's main worker writes its step count for the sweep's display, or None."""


NOT_SAMPLED = (
    "the process that launched the workers recorded no contention figures (an external "
    "launcher such as torchrun or srun, or it stopped before the workers did)"
)


def new_run_id() -> str:
    return uuid.uuid4().hex


def create_run_row(
    store: RunStore,
    run_id: str,
    config: RunConfig,
    sweep: SweepSlot | None = None,
    repeat_index: int | None = None,
) -> None:
    """Insert the run as 'running', with its resolved config and this machine's facts;
    `repeat_index` (a round of the bench) unless the sweep slot gives its repeat."""
    env = facts.collect_environment()
    framework = get_framework(config.parallel.framework)
    # Which framework trained it, and which release: the same model trains at other speeds
    # in another framework, or another release of one.
    env["framework"] = {"name": framework.name, "version": version(framework.name)}
    threads = config.parallel.threads_per_worker
    if threads is None:  # left to torch: record what torch picks (its default on this machine)
        threads = env["torch_num_threads_default"]
    store.create_run(
        run_id,
        config.workload,
        config.flat(),
        env,
        data_kind=config.data.kind,
        world_size=config.world_size,
        threads_per_worker=threads,
        affinity=config.parallel.affinity,
        precision=config.optimisation.precision,
        global_batch_size=config.optimisation.global_batch_size,
        tag=config.tag,
        config_hash=config.settings_hash(),
        sweep_id=sweep.sweep_id if sweep else None,
        sweep_item=sweep.item if sweep else None,
        repeat_index=sweep.repeat if sweep else repeat_index,
    )


def run_devices(config: RunConfig, workload: Workload | None = None) -> RunDevices:
    """What a run's hardware figures depend on of its config (and of its `workload`: whether
    its recurrent layers kept to fp32 under bf16)."""
    framework, device = config.parallel.framework, config.parallel.device
    precision = config.optimisation.precision
    return RunDevices(
        device,
        config.world_size,
        precision,
        get_framework(framework).gpu_tf32,
        recurrent_in_fp32=bool(
            workload and workload.recurrent_in_fp32(framework, device, precision)
        ),
    )


def store_outcome(
    store: RunStore,
    run_id: str,
    config: RunConfig,
    outcome: TrainOutcome,
    data_source: str,
    energy_j: dict[str, Any] | None,
    workload: Workload | None = None,
) -> RunResult:
    """Write rank 0's measurements as the completed run (one transaction); returns them.
    `workload` (the run's) says whether its recurrent layers kept to fp32 under bf16."""
    metrics = outcome.metrics
    result = RunResult(
        metrics=metrics,
        # What the workers actually ran with (cores, threads), beside what was asked for.
        workers=outcome.workers,
        data_source=data_source,
        # Devices, peak and MFU (against the table, and this machine's probe if stored).
        hardware=hardware_figures_safe(
            run_devices(config, workload),
            metrics.to_dict(),
            outcome.workers,
            store,
        ),
        energy_j=energy_j,
        pretrain=outcome.pretrain,
        # Only the launching process sees the whole run's process tree; it replaces this
        # once the workers have exited. A run started by another launcher keeps it.
        contention=Contention.unknown(NOT_SAMPLED),
    )
    store.complete_run(run_id, result.summary(), outcome.epochs, outcome.step_times_s)
    return result


SCRIPT_DATA = "the script's own"
"""A script run's data source: the script loads its data; trainscale never sees it."""

SCRIPT_PRECISION = "script"
"""A script run's precision: the script's own, which trainscale does not know."""


def create_script_row(
    store: RunStore, run_id: str, run: ScriptRun, repeat_index: int | None = None
) -> None:
    """Insert a script run as 'running'. What the script decides (its batch, its precision)
    is unknown until it has run: the global batch column holds 0 until rank 0 completes the
    run with the measured one, and the precision is 'script'. `repeat_index`: the bench's
    round the run belongs to.
    The data kind is the one the user gave (`--data synthetic` for generated tensors; by
    default 'real': the script's data is its own, not trainscale's generator)."""
    env = facts.collect_environment()
    env["framework"] = {"name": "pytorch", "version": version("pytorch")}
    threads = run.parallel.threads_per_worker
    store.create_run(
        run_id,
        run.workload,
        run.flat(),
        env,
        data_kind=run.data_kind,
        world_size=run.parallel.workers,
        threads_per_worker=threads if threads is not None else env["torch_num_threads_default"],
        affinity=run.parallel.affinity,
        precision=SCRIPT_PRECISION,
        global_batch_size=0,
        tag=run.tag,
        repeat_index=repeat_index,
    )


SCRIPT_MFU_UNKNOWN = (
    "not known: trainscale counts no FLOPs of a script's model (the script builds and runs "
    "it), so a script run has no achieved FLOP/s, and no peak at its precision to hold "
    "them against"
)
"""Why a script run's hardware figures stop at its devices (stored as `mfu_unknown`)."""


def store_script_outcome(
    store: RunStore,
    run_id: str,
    run: ScriptRun,
    summary: ScriptSummary,
    workers: list[dict[str, Any]],
) -> RunResult:
    """Write rank 0's figures of a script run as the completed run (one transaction).

    Its hardware figures are a built-in run's where they apply: the devices it ran on (the
    GPUs, or the cores its workers could use), which a report costs. A script gives no
    FLOPs per sample, so its achieved FLOP/s and MFU stay None, and `mfu_unknown` says
    why."""
    # The script's own precision, unknown to trainscale: no peak is matched to it.
    devices = RunDevices(run.parallel.device, len(workers), SCRIPT_PRECISION)
    extra = {**summary.extra, "mfu_unknown": SCRIPT_MFU_UNKNOWN}
    planned = run.parallel.threads_per_worker
    used = [w.get("torch_threads") for w in workers]
    if planned is not None and any(t is not None and t != planned for t in used):
        # The script set its own (torch.set_num_threads): the run is not the setting stored.
        extra["threads_set_by_script"] = {"planned": planned, "per_worker": used}
    result = RunResult(
        metrics=summary.metrics,
        workers=workers,
        data_source=SCRIPT_DATA,
        hardware=hardware_figures_safe(devices, summary.metrics.to_dict(), workers, store),
        contention=Contention.unknown(NOT_SAMPLED),
        extra=extra,
    )
    batch = summary.extra["global_batch_measured"]
    store.complete_run(run_id, result.summary(), [], summary.step_times_s, batch)
    return result
