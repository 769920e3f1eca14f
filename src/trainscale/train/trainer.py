"""The training loop. It does not know about parallelism or devices: the strategy does.

Clocks (see docs/methodology.md):
- each step is timed from batch slicing to the optimizer step: with perf_counter on the CPU,
  with CUDA events on a GPU (read only at evaluation points and epoch ends, so no step waits
  for the host);
- the training clock is the sum of all step times (warm-up steps included: they are real
  training work), plus the per-epoch shuffle; evaluation is timed apart and never on it;
- step-time statistics and throughput leave out the first `warmup_steps_untimed` steps;
- under data parallelism each step's time is the slowest rank's.
"""

from __future__ import annotations

import math
import resource
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.errors import ConfigError
from trainscale.metrics import stats
from trainscale.parallel.strategy import Strategy, worker_facts
from trainscale.train.breakdown import Breakdown, breakdown_fields, timed_allreduce_hook
from trainscale.train.evaluate import evaluate
from trainscale.train.faults import FaultInjector
from trainscale.train.flops import count_flops_per_sample
from trainscale.train.lr import make_optimizer, make_scheduler
from trainscale.train.precision import autocast, make_grad_scaler
from trainscale.train.progress import NullProgress, ProgressSink
from trainscale.train.timing import StepTimes, make_clock
from trainscale.workloads.base import Workload


@dataclass
class TrainOutcome:
    """What a run produced; identical on every rank after the final gather."""

    summary: dict[str, Any]
    epochs: list[dict[str, Any]]
    step_times_s: list[float]
    """Every step's time (slowest rank), warm-up steps included; the summary excludes them."""
    workers: list[dict[str, Any]] = field(default_factory=list)
    model: torch.nn.Module | None = None
    """The trained model, unwrapped (not stored; for callers and tests)."""


def worker_shard(num_train: int, world_size: int) -> int:
    """Training samples in one worker's shard (the shards are equal; the last is padded)."""
    return -(-num_train // world_size)


def check_batch_fits(
    batch_size: int,
    num_train: int,
    world_size: int,
    advice: str | None = None,
) -> None:
    """ConfigError unless a worker's shard holds at least one full batch: partial batches
    are dropped, so a larger batch would give an epoch of no steps at all.

    The parent calls it with the dataset size it found before any worker starts; the
    trainer's `plan_steps` applies the same rule to the data it loaded.
    """
    shard = worker_shard(num_train, world_size)
    if batch_size > shard:
        over = f" over {world_size} workers" if world_size > 1 else ""
        if advice is None:
            fewer = " or fewer workers" if world_size > 1 else ""
            advice = f"use --batch-size {shard} or less (per worker){fewer}"
        raise ConfigError(
            f"per-worker batch size {batch_size} is larger than a worker's share of the "
            f"training set ({shard} of {num_train} samples{over}); {advice}"
        )


def plan_steps(config: RunConfig, num_train: int, world_size: int) -> tuple[int, int]:
    """(steps per epoch, total steps). Partial last batches are dropped, as with drop_last."""
    check_batch_fits(config.optimisation.batch_size, num_train, world_size)
    steps_per_epoch = worker_shard(num_train, world_size) // config.optimisation.batch_size
    total = config.optimisation.steps or max(
        1, math.ceil(config.optimisation.epochs * steps_per_epoch)
    )
    return steps_per_epoch, total


def compile_model(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    workload: Workload,
    precision: str,
    device: torch.device,
) -> tuple[torch.nn.Module, float]:
    """torch.compile the model and trigger compilation on one batch, off the clock.

    Returns (compiled model, compile seconds). The warm-up forward/backward updates no
    weights, and batch-norm statistics are put back, so training starts from the same state.
    """
    compiled = torch.compile(model)
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    t0 = time.perf_counter()
    with autocast(device, precision):
        loss = workload.loss(compiled(x), y)
    loss.backward()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - t0
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(buffers[name])
    return compiled, seconds


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
    device = strategy.device
    faults = FaultInjector(env.rank)
    torch.manual_seed(config.optimisation.seed)
    data = strategy.place_data(data)
    model = workload.build_model(data.meta).to(device)
    train_x = data.train_x
    if config.parallel.channels_last and train_x.dim() == 4:
        # Once for the whole in-memory set; batches are gathered with advanced indexing,
        # which keeps the layout (index_select would return contiguous NCHW batches).
        model = model.to(memory_format=torch.channels_last)
        train_x = train_x.contiguous(memory_format=torch.channels_last)
    flops_x, flops_y = (
        workload.flops_batch(data) if workload.flops_batch else (train_x[:2], data.train_y[:2])
    )
    # Off the clock, before any timed work.
    flops_per_sample = count_flops_per_sample(model, flops_x, flops_y, workload)
    pretrain_figures: dict[str, Any] = {}
    pretrain_s = 0.0
    if workload.pretrain is not None:
        # Before the DDP wrap: the phase averages its own updates across ranks, and DDP then
        # starts every replica from rank 0's (identical) pre-trained weights.
        t0 = time.perf_counter()
        pretrain_figures = workload.pretrain(model, data, strategy, config, progress)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        pretrain_s = strategy.max_float(time.perf_counter() - t0)
    model = strategy.wrap(model)
    compile_s = None
    if config.optimisation.compile:
        model, compile_s = compile_model(
            model,
            train_x[: config.optimisation.batch_size],
            data.train_y[: config.optimisation.batch_size],
            workload,
            config.optimisation.precision,
            device,
        )
    optimizer = make_optimizer(
        config.optimisation.optimizer,
        model.parameters(),
        config.optimisation.lr,
        config.optimisation.momentum,
        config.optimisation.weight_decay,
        nesterov=config.optimisation.nesterov,
        fused=device.type == "cuda",
    )
    scaler = make_grad_scaler(device, config.optimisation.precision)
    steps_per_epoch, total_steps = plan_steps(config, data.num_train, env.world_size)
    scheduler = make_scheduler(
        optimizer, total_steps, config.optimisation.schedule, config.optimisation.warmup_fraction
    )
    eval_every = config.measurement.eval_every or max(1, steps_per_epoch // 4)
    # No accuracy claim from synthetic data, ever; none either when evaluation is off.
    can_claim_accuracy = data.kind == "real" and config.measurement.evaluate
    num_epochs = math.ceil(total_steps / steps_per_epoch)
    micro = config.optimisation.batch_size // config.parallel.grad_accum
    # Reading a loss value synchronises a GPU with the host; only show it where it is free.
    show_loss = device.type == "cpu"

    clock = make_clock(device)
    times = StepTimes(clock)
    breakdown = Breakdown(
        clock, config.measurement.breakdown_every, config.measurement.warmup_steps_untimed
    )
    comm_marked = config.measurement.breakdown_every > 0 and strategy.hook_communication(
        model, timed_allreduce_hook, breakdown
    )
    curve: list[tuple[float, float]] = []  # (training clock s, test accuracy)
    epochs: list[dict[str, Any]] = []
    train_clock_s = pretrain_s  # pre-training is training: it is on the clock
    eval_time_s = 0.0
    augment_generator = torch.Generator().manual_seed(config.optimisation.seed * 1000 + env.rank)
    step = 0
    last_eval_step = -1
    last_accuracy, last_loss, last_f1 = None, None, None

    def settle_clock() -> float:
        """Resolve pending step times; returns their sum (training seconds since last call)."""
        nonlocal train_clock_s
        new = sum(times.pending())
        train_clock_s += new
        return new

    def run_eval() -> None:
        nonlocal eval_time_s, last_accuracy, last_loss, last_f1, last_eval_step
        last_eval_step = step
        settle_clock()
        t0 = time.perf_counter()
        last_accuracy, last_loss, last_f1 = evaluate(
            strategy.unwrap(model),
            data,
            strategy,
            config.optimisation.precision,
            config.parallel.channels_last,
        )
        # Ranks run in lock-step; the slowest one's clock is the run's clock at this point.
        clock_s = strategy.max_float(train_clock_s)
        curve.append((clock_s, last_accuracy))
        eval_time_s += time.perf_counter() - t0
        progress.log(
            f"step {step}/{total_steps}  train clock {clock_s:.1f}s  "
            f"test accuracy {last_accuracy:.4f}  test loss {last_loss:.4f}"
        )

    progress.start(total_steps, f"{workload.name} x{env.world_size}")
    model.train()
    for epoch in range(num_epochs):
        epoch_t0 = time.perf_counter()
        epoch_train_s, epoch_eval_s0 = 0.0, eval_time_s
        loss_sum = torch.zeros((), device=device)
        t_shuffle = time.perf_counter()
        order = strategy.shard_indices(data.num_train, epoch, config.optimisation.seed)
        if workload.batch_order is not None:
            # Seeded alike on every rank, so ranks order their batches alike (for length
            # bucketing: similar lengths at the same step, no rank waits on a long batch).
            generator = torch.Generator().manual_seed(config.optimisation.seed * 1_000_003 + epoch)
            order = workload.batch_order(order, data, config.optimisation.batch_size, generator)
        order = order.to(device)
        shuffle_s = time.perf_counter() - t_shuffle
        epoch_train_s += shuffle_s
        train_clock_s += shuffle_s
        steps_this_epoch = min(steps_per_epoch, total_steps - step)
        for batch in range(steps_this_epoch):
            sampled = breakdown.sampled(step)
            start = clock.mark()
            if sampled:
                breakdown.begin(start)
            index = order[
                batch * config.optimisation.batch_size : (batch + 1)
                * config.optimisation.batch_size
            ]
            x = train_x[index]
            y = data.train_y[index]
            if workload.augment is not None:
                x = workload.augment(x, augment_generator)
            if sampled:
                breakdown.mark("data")
            optimizer.zero_grad(set_to_none=True)
            for part in range(config.parallel.grad_accum):
                last = part == config.parallel.grad_accum - 1
                # Only the last micro-batch communicates; the others accumulate locally.
                with nullcontext() if last else strategy.no_sync(model):
                    with autocast(device, config.optimisation.precision):
                        loss = workload.loss(
                            model(x[part * micro : (part + 1) * micro]),
                            y[part * micro : (part + 1) * micro],
                            config.optimisation.label_smoothing,
                        )
                    if config.parallel.grad_accum > 1:
                        loss = loss / config.parallel.grad_accum
                    if sampled:
                        breakdown.mark("forward")
                    (scaler.scale(loss) if scaler else loss).backward()
                    if sampled:
                        breakdown.mark("backward")
            if scaler:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            end = clock.mark()
            if sampled:
                breakdown.mark("optimizer")
                breakdown.end()
            times.add(start, end)
            loss_sum += loss.detach().float() * config.parallel.grad_accum
            step += 1
            faults.after_step(step)
            if step % 10 == 0 or step == total_steps:
                progress.update(step, **({"loss": float(loss.detach())} if show_loss else {}))
            if can_claim_accuracy and step % eval_every == 0 and step != total_steps:
                run_eval()
        if can_claim_accuracy and last_eval_step != step:
            run_eval()  # every epoch ends with an evaluation, for the per-epoch curve
        settle_clock()
        epoch_train_s += sum(times.seconds[step - steps_this_epoch : step])
        epochs.append(
            {
                "epoch": epoch + 1,
                "train_loss": float(loss_sum) / max(1, steps_this_epoch),
                "test_loss": last_loss if can_claim_accuracy else None,
                "test_accuracy": last_accuracy if can_claim_accuracy else None,
                "train_clock_s": strategy.max_float(train_clock_s),
                "epoch_time_s": strategy.max_float(epoch_train_s),
                "eval_time_s": eval_time_s - epoch_eval_s0,
                "full": steps_this_epoch == steps_per_epoch,
                "wall_s": time.perf_counter() - epoch_t0,
            }
        )
    progress.stop()

    run_clock_s = strategy.max_float(train_clock_s)
    per_rank = strategy.gather_objects(times.seconds)
    run_step_times = stats.elementwise_max(per_rank)
    facts = worker_facts()
    facts["rank"] = env.rank
    facts["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if device.type == "cuda":
        facts["peak_gpu_bytes"] = torch.cuda.max_memory_allocated(device)
    facts["breakdown_s"] = breakdown.medians_s()
    workers = strategy.gather_objects(facts)
    summary = summarize(
        config,
        run_step_times,
        curve,
        epochs,
        run_clock_s,
        eval_time_s,
        can_claim_accuracy,
        last_accuracy,
        last_loss,
        workers,
    )
    summary["test_macro_f1"] = last_f1 if can_claim_accuracy else None
    summary["flops_per_sample"] = flops_per_sample
    summary["pretrain_time_s"] = pretrain_s if workload.pretrain is not None else None
    summary["supervised_time_s"] = run_clock_s - pretrain_s
    summary["compile_time_s"] = compile_s
    per_rank_breakdown = [w.pop("breakdown_s") for w in workers]
    summary.update(breakdown_fields(per_rank_breakdown, breakdown.num_sampled_steps, comm_marked))
    if pretrain_figures:
        summary["pretrain"] = pretrain_figures
    return TrainOutcome(
        summary=summary,
        epochs=epochs,
        step_times_s=run_step_times,
        workers=workers,
        model=strategy.unwrap(model),
    )


def summarize(
    config: RunConfig,
    step_times_s: list[float],
    curve: list[tuple[float, float]],
    epochs: list[dict[str, Any]],
    train_clock_s: float,
    eval_time_s: float,
    real_data: bool,
    test_accuracy: float | None,
    test_loss: float | None,
    workers: list[dict[str, Any]],
) -> dict[str, Any]:
    """The run's headline numbers, following the measurement rules in docs/methodology.md."""
    timed = step_times_s[config.measurement.warmup_steps_untimed :]
    warmup_excluded = bool(timed)
    if not timed:  # a run shorter than the warm-up: report all steps, and say so
        timed = step_times_s
    full_epochs = [e["epoch_time_s"] for e in epochs if e["full"]]
    reached = stats.first_reaching(curve, config.measurement.target_accuracy) if real_data else None
    return {
        "samples_per_s": config.optimisation.global_batch_size * len(timed) / sum(timed),
        "samples_per_s_per_worker": config.optimisation.batch_size * len(timed) / sum(timed),
        "step_time_s_median": stats.median(timed),
        "step_time_s_p90": stats.percentile(timed, 90),
        "step_time_s_iqr": stats.iqr(timed),
        "num_timed_steps": len(timed),
        "warmup_steps_excluded": config.measurement.warmup_steps_untimed if warmup_excluded else 0,
        "epoch_time_s": stats.median(full_epochs) if full_epochs else None,
        "time_to_target_s": reached,
        "target_accuracy": config.measurement.target_accuracy,
        "test_accuracy": test_accuracy if real_data else None,
        "test_loss": test_loss if real_data else None,
        "accuracy_curve": [[t, a] for t, a in curve],
        "train_time_s": train_clock_s,
        "eval_time_s": eval_time_s,
        "num_steps": len(step_times_s),
        "num_samples": len(step_times_s) * config.optimisation.global_batch_size,
        "peak_memory_bytes_per_worker": [w["peak_rss_bytes"] for w in workers],
        "peak_gpu_memory_bytes_per_worker": (
            [w["peak_gpu_bytes"] for w in workers] if "peak_gpu_bytes" in workers[0] else None
        ),
    }
