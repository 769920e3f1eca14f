"""An emulation: the global steps of one mode, driven by the trainer's loop (train/loop.py).

A *global step* is one update of the global model: for sync, one global batch (N x b
samples); for async, one worker's gradient applied (b samples); for local SGD, one local
step of every replica (N x b samples). An *epoch* is one pass of all workers over their
shards: N x b samples per step make `shard // b` global steps per epoch for sync and local
SGD, and `N x (shard // b)` for async.

Each mode is a step function of the loop (`train.loop.StepFunction`), so epochs, evaluation
and the per-epoch rows are the trainer's: evaluation every `eval_every` global steps
(default: a quarter of an epoch) and at the end of every epoch, on the full test set, off
the training clock. What differs is declared by the modes' `StepRules`
(`emulate.gradient.emulation_rules`): the emulated workers draw their own batches, and no
step times are kept. The loop runs with the serial strategy: one process, no peers.

The training clock here is the emulating process's own time (one process doing the work of
N workers): it orders the accuracy curve like a run's, but is no prediction of how long N
workers would take.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.emulation.async_ps import AsyncParameterServer
from trainscale.emulation.local_sgd import LocalSGD
from trainscale.emulation.spec import EmulationSpec
from trainscale.emulation.streams import WorkerStream, make_streams
from trainscale.emulation.summary import emulation_summary
from trainscale.emulation.sync import SyncSGD
from trainscale.errors import ConfigError
from trainscale.hardware.resources import peak_rss_bytes
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy, worker_facts
from trainscale.results.run_result import RunResult
from trainscale.train.loop import StepFunction, run_loop
from trainscale.train.plan import StepPlan, check_batch_fits, plan_steps, total_for
from trainscale.train.progress import NullProgress, ProgressSink
from trainscale.train.setup import build_model, run_pretraining
from trainscale.workloads.base import Workload


class Mode(StepFunction, Protocol):
    """An emulation mode: a step function of the loop, with figures of its own."""

    def figures(self) -> dict[str, Any]:
        """Mode-specific figures for the summary (e.g. staleness)."""


@dataclass
class EmulationOutcome:
    """What an emulation produced: its result and per-epoch rows, and the model."""

    result: RunResult
    epochs: list[dict[str, Any]]
    model: nn.Module
    """The final global model (not stored; for callers and tests)."""

    @property
    def summary(self) -> dict[str, Any]:
        """The stored summary (`RunResult.summary`)."""
        return self.result.summary()


@dataclass(frozen=True)
class EmulationPlan(StepPlan):
    """How many global steps an emulation takes (`steps_per_epoch` counts global steps)."""

    batches_per_worker_epoch: int
    """A worker's batches per epoch (its shard // b), as the trainer plans a rank's."""


def plan_global_steps(config: RunConfig, spec: EmulationSpec, num_train: int) -> EmulationPlan:
    """The global steps of an emulation (see the module docstring); ConfigError when b
    exceeds a worker's share of the training set."""
    check_batch_fits(
        config.optimisation.batch_size,
        num_train,
        spec.workers,
        advice="use a smaller --per-worker-batch-size or fewer workers",
    )
    per_worker = plan_steps(config, num_train, spec.workers).steps_per_epoch
    per_epoch = per_worker * spec.workers if spec.mode == "async" else per_worker
    return EmulationPlan(per_epoch, total_for(config, per_epoch), per_worker)


def make_mode(
    spec: EmulationSpec,
    model: nn.Module,
    streams: list[WorkerStream],
    workload: Workload,
    config: RunConfig,
    total_steps: int,
) -> Mode:
    """The emulation mode `spec` names, around `model` (the initial global model)."""
    if spec.mode == "sync":
        return SyncSGD(model, streams, workload, config, total_steps)
    if spec.mode == "async":
        return AsyncParameterServer(
            model,
            streams,
            workload,
            config,
            total_steps,
            spread=float(spec.staleness_spread or 0.0),
            staleness_aware_lr=spec.staleness_aware_lr,
        )
    if spec.mode == "local-sgd":
        return LocalSGD(model, streams, workload, config, total_steps, int(spec.local_steps or 1))
    raise ValueError(f"unknown emulation mode {spec.mode!r}")


def emulate(
    config: RunConfig,
    spec: EmulationSpec,
    workload: Workload,
    data: TensorData,
    progress: ProgressSink | None = None,
) -> EmulationOutcome:
    """Train `workload` as `spec.workers` workers in `spec.mode` would, in this process.

    `config` and `spec` come resolved from `spec.emulation_config` and `spec.resolve_spec`.
    Raises ConfigError for data that cannot support an accuracy claim (synthetic).
    """
    if data.kind != "real":
        raise ConfigError("emulation needs real data: synthetic data makes no accuracy claim")
    progress = progress or NullProgress()
    # One process, no peers: the serial strategy evaluates the full test set and runs any
    # pre-training phase as one worker would.
    serial = make_strategy(config, DistEnv())
    model, train_x = build_model(config, workload, data, torch.device(config.parallel.device))
    plan = plan_global_steps(config, spec, data.num_train)
    # Not emulated: pre-training runs as one worker, then the N workers fine-tune.
    pretraining = run_pretraining(model, workload, data, serial, config, progress)
    streams = make_streams(
        spec.workers, config, workload, data, train_x, plan.batches_per_worker_epoch
    )
    mode = make_mode(spec, model, streams, workload, config, plan.total_steps)
    loop = run_loop(
        mode,
        plan,
        config,
        data,
        serial,
        progress,
        label=f"{workload.name} {spec.mode} x{spec.workers}",
        clock_start_s=pretraining.seconds if pretraining else 0.0,
    )

    facts = worker_facts()
    facts["rank"] = 0
    facts["peak_rss_bytes"] = peak_rss_bytes()
    metrics = emulation_summary(
        config, spec, plan, loop, mode.figures(), pretraining, facts["peak_rss_bytes"]
    )
    result = RunResult(
        metrics=metrics,
        workers=[facts],
        data_source=data.source,
        pretrain=dict(pretraining.figures) if pretraining and pretraining.figures else None,
    )
    return EmulationOutcome(
        result=result, epochs=[epoch.as_row() for epoch in loop.epochs], model=loop.model
    )
