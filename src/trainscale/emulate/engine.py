"""The emulation loop: global steps of one mode, evaluation at a fixed period, the summary.

A *global step* is one update of the global model: for sync, one global batch (N x b
samples); for async, one worker's gradient applied (b samples); for local SGD, one local
step of every replica (N x b samples). An *epoch* is one pass of all workers over their
shards: N x b samples per step make `shard // b` global steps per epoch for sync and local
SGD, and `N x (shard // b)` for async.

Evaluation runs every `eval_every` global steps (default: a quarter of an epoch) and at
the end of every epoch, on the full test set, off the training clock. Steps to target is
the first evaluated global step whose test accuracy reaches the target; samples to target
is that step x B.

The training clock here is the emulating process's own time (one process doing the work of
N workers): it orders the accuracy curve like a run's, but is no prediction of how long N
workers would take. No step times are stored.
"""

from __future__ import annotations

import math
import resource
import time
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.emulate.async_ps import AsyncParameterServer
from trainscale.emulate.local_sgd import LocalSGD
from trainscale.emulate.spec import EmulationSpec
from trainscale.emulate.streams import WorkerStream, make_streams
from trainscale.emulate.sync import SyncSGD
from trainscale.errors import ConfigError
from trainscale.metrics import stats
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy, worker_facts
from trainscale.train.evaluate import evaluate
from trainscale.train.progress import NullProgress, ProgressSink
from trainscale.train.trainer import check_batch_fits, plan_steps
from trainscale.workloads.base import Workload


class Mode(Protocol):
    """What the loop needs from an emulation mode."""

    def step(self) -> torch.Tensor:
        """One global step; returns its training loss."""

    def eval_model(self) -> nn.Module:
        """The global model as it stands (evaluated without changing training)."""

    def finish(self) -> nn.Module:
        """End training; returns the final global model."""

    def figures(self) -> dict[str, Any]:
        """Mode-specific figures for the summary (e.g. staleness)."""


@dataclass
class EmulationOutcome:
    """What an emulation produced: the run's summary and per-epoch rows, and the model."""

    summary: dict[str, Any]
    epochs: list[dict[str, Any]]
    model: nn.Module
    """The final global model (not stored; for callers and tests)."""


@dataclass(frozen=True)
class StepPlan:
    """How many global steps an emulation takes."""

    batches_per_worker_epoch: int
    """A worker's batches per epoch (its shard // b), as the trainer plans a rank's."""
    steps_per_epoch: int
    """Global steps per epoch."""
    total_steps: int


def plan_global_steps(config: RunConfig, spec: EmulationSpec, num_train: int) -> StepPlan:
    """The global steps of an emulation (see the module docstring); ConfigError when b
    exceeds a worker's share of the training set."""
    check_batch_fits(
        config.optimisation.batch_size,
        num_train,
        spec.workers,
        advice="use a smaller --per-worker-batch-size or fewer workers",
    )
    per_worker, _ = plan_steps(config, num_train, spec.workers)
    per_epoch = per_worker * spec.workers if spec.mode == "async" else per_worker
    total = config.optimisation.steps or max(1, math.ceil(config.optimisation.epochs * per_epoch))
    return StepPlan(per_worker, per_epoch, total)


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
    device = torch.device(config.parallel.device)
    # One process, no peers: the serial strategy evaluates the full test set and runs any
    # pre-training phase as one worker would.
    serial = make_strategy(config, DistEnv())
    torch.manual_seed(config.optimisation.seed)
    model = workload.build_model(data.meta).to(device)
    train_x = data.train_x
    if config.parallel.channels_last and train_x.dim() == 4:
        model = model.to(memory_format=torch.channels_last)
        train_x = train_x.contiguous(memory_format=torch.channels_last)
    plan = plan_global_steps(config, spec, data.num_train)

    train_clock_s = 0.0
    pretrain_figures: dict[str, Any] = {}
    if workload.pretrain is not None:
        # Not emulated: pre-training runs as one worker, then the N workers fine-tune.
        t0 = time.perf_counter()
        pretrain_figures = workload.pretrain(model, data, serial, config, progress)
        train_clock_s += time.perf_counter() - t0
    pretrain_s = train_clock_s

    streams = make_streams(
        spec.workers, config, workload, data, train_x, plan.batches_per_worker_epoch
    )
    mode = make_mode(spec, model, streams, workload, config, plan.total_steps)
    eval_every = config.measurement.eval_every or max(1, plan.steps_per_epoch // 4)
    samples_per_step = spec.samples_per_step

    curve: list[tuple[float, float]] = []  # (training clock s, test accuracy)
    steps_curve: list[list[float]] = []  # [global step, samples, test accuracy]
    epochs: list[dict[str, Any]] = []
    eval_time_s = 0.0
    last: tuple[float, float, float] = (math.nan, math.nan, math.nan)

    def run_eval(step: int) -> None:
        nonlocal eval_time_s, last
        t0 = time.perf_counter()
        last = evaluate(
            mode.eval_model(),
            data,
            serial,
            config.optimisation.precision,
            config.parallel.channels_last,
        )
        eval_time_s += time.perf_counter() - t0
        curve.append((train_clock_s, last[0]))
        steps_curve.append([step, step * samples_per_step, last[0]])
        progress.log(
            f"step {step}/{plan.total_steps}  samples {step * samples_per_step}  "
            f"test accuracy {last[0]:.4f}  test loss {last[1]:.4f}"
        )

    label = f"{workload.name} {spec.mode} x{spec.workers}"
    progress.start(plan.total_steps, label)
    loss_sum = torch.zeros(())
    epoch_steps = 0
    epoch_clock0, epoch_eval0 = train_clock_s, eval_time_s
    for step in range(1, plan.total_steps + 1):
        t0 = time.perf_counter()
        loss_sum += mode.step()
        train_clock_s += time.perf_counter() - t0
        epoch_steps += 1
        epoch_end = step % plan.steps_per_epoch == 0 or step == plan.total_steps
        if step % 10 == 0 or step == plan.total_steps:
            progress.update(step, loss=float(loss_sum) / epoch_steps)
        if step % eval_every == 0 or epoch_end:
            run_eval(step)
        if epoch_end:
            epochs.append(
                {
                    "epoch": len(epochs) + 1,
                    "train_loss": float(loss_sum) / epoch_steps,
                    "test_loss": last[1],
                    "test_accuracy": last[0],
                    "train_clock_s": train_clock_s,
                    "epoch_time_s": train_clock_s - epoch_clock0,
                    "eval_time_s": eval_time_s - epoch_eval0,
                    "full": epoch_steps == plan.steps_per_epoch,
                    "global_steps": step,
                }
            )
            loss_sum = torch.zeros(())
            epoch_steps = 0
            epoch_clock0, epoch_eval0 = train_clock_s, eval_time_s
    progress.stop()
    model = mode.finish()

    summary = _summary(
        config, spec, plan, eval_every, curve, steps_curve, train_clock_s, eval_time_s, last
    )
    summary["emulation"].update(mode.figures())
    summary["pretrain_time_s"] = pretrain_s if workload.pretrain is not None else None
    if pretrain_figures:
        summary["pretrain"] = pretrain_figures
    facts = worker_facts()
    facts["rank"] = 0
    facts["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    summary["workers"] = [facts]
    summary["peak_memory_bytes_per_worker"] = [facts["peak_rss_bytes"]]
    summary["data_source"] = data.source
    return EmulationOutcome(summary=summary, epochs=epochs, model=model)


def _summary(
    config: RunConfig,
    spec: EmulationSpec,
    plan: StepPlan,
    eval_every: int,
    curve: list[tuple[float, float]],
    steps_curve: list[list[float]],
    train_clock_s: float,
    eval_time_s: float,
    last: tuple[float, float, float],
) -> dict[str, Any]:
    """The run summary: the usual accuracy fields plus `emulation` (docs/emulation.md)."""
    target = config.measurement.target_accuracy
    reached = next((int(s) for s, _, accuracy in steps_curve if accuracy >= target), None)
    samples_per_step = spec.samples_per_step
    emulation = {
        "mode": spec.mode,
        "workers": spec.workers,
        "global_batch_size": samples_per_step,
        "per_worker_batch_size": spec.per_worker_batch_size,
        "lr_scaling": config.optimisation.lr_scaling,
        "lr": config.optimisation.lr,
        "warmup_fraction": config.optimisation.warmup_fraction,
        "local_steps": spec.local_steps if spec.mode == "local-sgd" else None,
        "staleness": None,
        "staleness_spread": spec.staleness_spread if spec.mode == "async" else None,
        "staleness_aware_lr": spec.staleness_aware_lr if spec.mode == "async" else None,
        "steps_to_target": reached,
        "samples_to_target": reached * samples_per_step if reached is not None else None,
        "target_accuracy": target,
        "steps_per_epoch": plan.steps_per_epoch,
        "total_steps": plan.total_steps,
        "eval_every": eval_every,
        "steps_curve": steps_curve,
    }
    return {
        "test_accuracy": last[0],
        "test_loss": last[1],
        "test_macro_f1": last[2],
        "target_accuracy": target,
        "time_to_target_s": stats.first_reaching(curve, target),
        "accuracy_curve": [[t, a] for t, a in curve],
        "train_time_s": train_clock_s,
        "eval_time_s": eval_time_s,
        "num_steps": plan.total_steps,
        "num_samples": plan.total_steps * samples_per_step,
        "emulation": emulation,
    }
