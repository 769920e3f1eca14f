"""A run's training, start to end: set up the model, drive the loop with the training step,
gather the ranks' measurements and summarise them.

Which module does what: `setup` (model, FLOPs, pre-training, wrap, compile), `lr` (the
optimizer and its schedule), `warmup` (a GPU's one-off costs, off the clock), `plan`
(steps), `batches` (each epoch's order and each step's batch), `step` (one optimizer step),
`loop` (epochs, evaluation, clocks; docs/methodology.md), `summary` (the stored figures).
Nothing here knows about parallelism beyond the `Strategy`'s collectives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.hardware.resources import peak_rss_bytes
from trainscale.metrics import stats
from trainscale.metrics.flops import FlopCount
from trainscale.parallel.strategy import Strategy, worker_facts
from trainscale.results.run_result import RunMetrics, measured_summary
from trainscale.train.batches import WorkerBatches
from trainscale.train.breakdown import Breakdown
from trainscale.train.loop import Evaluator, StepFunction, run_loop
from trainscale.train.plan import StepPlan, plan_steps
from trainscale.train.progress import NullProgress, ProgressSink
from trainscale.train.setup import Pretraining, prepare_model
from trainscale.train.step import TrainStep
from trainscale.train.summary import TrainMeasurements, resolved_target, summarize
from trainscale.train.warmup import restart_peak_memory, warms_up
from trainscale.workloads.base import Workload


@dataclass
class TrainOutcome:
    """What a run produced; identical on every rank after the final gather."""

    metrics: RunMetrics
    epochs: list[dict[str, Any]]
    step_times_s: list[float]
    """Every step's time (slowest rank), warm-up steps included; the summary excludes them."""
    workers: list[dict[str, Any]] = field(default_factory=list)
    model: Any = None
    """The trained model, unwrapped (not stored; for callers and tests): a torch module, or
    another framework's model."""
    pretrain: dict[str, Any] | None = None
    """The pre-training phase's figures, when the workload has one."""

    @property
    def summary(self) -> dict[str, Any]:
        """What training measured, as summary keys (the stored summary adds the workers,
        the data's source and the hardware: `RunResult.summary`)."""
        return measured_summary(self.metrics, self.pretrain)


def train(
    config: RunConfig,
    workload: Workload,
    data: TensorData,
    strategy: Strategy,
    progress: ProgressSink | None = None,
) -> TrainOutcome:
    """Train `workload` on `data` as `config` says; returns measurements (all ranks)."""
    progress = progress or NullProgress()
    env = strategy.env
    data = strategy.place_data(data)
    plan = plan_steps(config, data.num_train, env.world_size)
    prepared = prepare_model(config, workload, data, strategy, progress)
    stepper = TrainStep(config, workload, strategy, prepared.model, plan, prepared.loss)
    batches = WorkerBatches(config, workload, data, prepared.train_x, strategy.sharding)
    warmup_s = prepared.device_warmup_s
    if warms_up(strategy.device):  # a GPU's one-off costs, off the clock (train/warmup.py)
        warmup_s = (warmup_s or 0.0) + strategy.max_float(stepper.warm_up(batches))
        restart_peak_memory(strategy.device)
    return measure_training(
        config,
        workload,
        data,
        strategy,
        progress,
        stepper,
        plan,
        batches,
        SetupFigures(prepared.flops, prepared.pretraining, prepared.compile_s, warmup_s),
        breakdown=stepper.breakdown,
        comm_marked=stepper.comm_marked,
    )


@dataclass(frozen=True)
class SetupFigures:
    """What was measured while the model was set up, before its first step."""

    flops: FlopCount | None
    """Training FLOPs per sample, in all and by operator kind; None where not counted."""
    pretraining: Pretraining | None
    compile_s: float | None
    """Compilation (torch.compile; another framework's graph tracing and XLA compilation),
    off the training clock."""
    device_warmup_s: float | None = None
    """A PyTorch run's GPU warm-up (train/warmup.py), off the clock."""


def measure_training(
    config: RunConfig,
    workload: Workload,
    data: TensorData,
    strategy: Strategy,
    progress: ProgressSink,
    stepper: StepFunction,
    plan: StepPlan,
    batches: WorkerBatches,
    setup: SetupFigures,
    *,
    evaluator: Evaluator | None = None,
    breakdown: Breakdown | None = None,
    comm_marked: bool = False,
    replicas: int | None = None,
    facts: dict[str, Any] | None = None,
) -> TrainOutcome:
    """Drive `stepper` through the loop, gather every rank's measurements and summarise them:
    the measurement rules every framework's trainer shares (docs/methodology.md).

    `evaluator` scores a model that is no PyTorch module; `breakdown` holds sampled steps'
    phase times (PyTorch's step); `replicas` names the data-parallel replicas when they are
    not one per process (a framework's single-process strategy); `facts` are this worker's
    framework-specific facts, stored with the worker's.
    """
    env = strategy.env
    pretraining = setup.pretraining
    loop = run_loop(
        stepper,
        plan,
        config,
        data,
        strategy,
        progress,
        label=f"{workload.name} x{replicas or env.world_size}",
        batches=batches,
        clock_start_s=pretraining.seconds if pretraining else 0.0,  # pre-training is training
        evaluator=evaluator,
    )

    step_times_s = stats.elementwise_max(strategy.gather_objects(loop.step_times_s))
    worker = worker_facts()
    worker.update(facts or {})
    worker["rank"] = env.rank
    worker["peak_rss_bytes"] = peak_rss_bytes()
    if strategy.device.type == "cuda":
        worker["peak_gpu_bytes"] = torch.cuda.max_memory_allocated(strategy.device)
    worker["breakdown_s"] = breakdown.medians_s() if breakdown else {}
    workers = strategy.gather_objects(worker)
    breakdowns = [w.pop("breakdown_s") for w in workers]
    opt = config.optimisation
    metrics = summarize(
        TrainMeasurements(
            global_batch_size=opt.global_batch_size,
            per_worker_batch_size=opt.batch_size,
            warmup_steps_untimed=config.measurement.warmup_steps_untimed,
            target_accuracy=resolved_target(config),
            step_times_s=step_times_s,
            curve=loop.curve,
            epochs=loop.epochs,
            train_clock_s=loop.train_clock_s,
            eval_time_s=loop.eval_time_s,
            evaluated=loop.evaluated,
            final=loop.final,
            workers=workers,
            breakdowns=breakdowns,
            comm_marked=comm_marked,
            breakdown_sampled_steps=breakdown.num_sampled_steps if breakdown else 0,
            flops=setup.flops,
            pretrain_s=pretraining.seconds if pretraining else None,
            compile_s=setup.compile_s,
            device_warmup_s=setup.device_warmup_s,
            planned_steps=plan.total_steps,
            stopped_at_target=loop.stopped_at_target,
            unequal_steps=workload.unequal_steps,
        )
    )
    return TrainOutcome(
        metrics=metrics,
        pretrain=dict(pretraining.figures) if pretraining and pretraining.figures else None,
        epochs=[epoch.as_row() for epoch in loop.epochs],
        step_times_s=step_times_s,
        workers=workers,
        model=loop.model,
    )
