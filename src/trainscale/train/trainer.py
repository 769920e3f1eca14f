"""The training loop. It does not know about parallelism: the strategy does.

Clocks (see docs/methodology.md):
- each step is timed with perf_counter from batch slicing to the optimizer step;
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

from trainscale.config import RunConfig
from trainscale.errors import ConfigError
from trainscale.metrics import stats
from trainscale.parallel.strategy import Strategy, worker_facts
from trainscale.train.faults import FaultInjector
from trainscale.train.lr import make_optimizer, make_scheduler
from trainscale.train.progress import NullProgress, ProgressSink
from trainscale.workloads.base import TensorData, Workload

EVAL_BATCH = 200  # larger eval batches were 2.4x slower on a 2-core CPU (activation memory)


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


def _autocast(precision: str):
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return nullcontext()


def plan_steps(config: RunConfig, num_train: int, world_size: int) -> tuple[int, int]:
    """(steps per epoch, total steps). Partial last batches are dropped, as with drop_last."""
    shard = -(-num_train // world_size)
    steps_per_epoch = shard // config.batch_size
    if steps_per_epoch == 0:
        raise ConfigError(
            f"per-worker batch size {config.batch_size} is larger than a worker's share of the "
            f"training set ({shard} samples); use a smaller --batch-size"
        )
    total = config.steps or max(1, math.ceil(config.epochs * steps_per_epoch))
    return steps_per_epoch, total


def macro_f1(confusion: torch.Tensor) -> float:
    """Unweighted mean of per-class F1 from a confusion matrix (rows = truth, cols = pred)."""
    confusion = confusion.double()
    true_pos = confusion.diag()
    precision_den = confusion.sum(dim=0)
    recall_den = confusion.sum(dim=1)
    f1_den = precision_den + recall_den
    f1 = torch.where(f1_den > 0, 2 * true_pos / f1_den.clamp(min=1e-12), torch.zeros_like(f1_den))
    present = recall_den > 0  # classes absent from the test set do not count
    return float(f1[present].mean()) if present.any() else 0.0


def evaluate(
    model: torch.nn.Module,
    data: TensorData,
    strategy: Strategy,
    precision: str,
    channels_last: bool,
) -> tuple[float, float, float]:
    """(accuracy, mean loss, macro-F1) on the test set; ranks split it and sum their counts."""
    part = strategy.eval_shard(data.num_test)
    xs, ys = data.test_x[part], data.test_y[part]
    totals = torch.zeros(3, dtype=torch.float64)  # correct, loss sum, count
    confusion = None
    model.eval()
    with torch.no_grad(), _autocast(precision):
        for start in range(0, xs.shape[0], EVAL_BATCH):
            x = xs[start : start + EVAL_BATCH]
            if channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            y = ys[start : start + EVAL_BATCH]
            logits = model(x).float()
            predicted = logits.argmax(dim=1)
            num_classes = logits.shape[1]
            if confusion is None:
                confusion = torch.zeros(num_classes * num_classes, dtype=torch.float64)
            confusion += torch.bincount(
                y * num_classes + predicted, minlength=num_classes * num_classes
            ).double()
            totals[0] += (predicted == y).sum().item()
            totals[1] += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
            totals[2] += y.numel()
    model.train()
    # Every rank has at least one test sample here (test sets are far larger than ranks).
    strategy.sum_tensor(totals)
    strategy.sum_tensor(confusion)
    correct, loss_sum, count = totals.tolist()
    side = int(confusion.numel() ** 0.5)
    return correct / count, loss_sum / count, macro_f1(confusion.view(side, side))


def count_flops_per_sample(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, workload: Workload
) -> int | None:
    """Training FLOPs (forward + backward) per sample, counted by torch.utils.flop_counter.

    The counter covers matrix multiplications and convolutions, the ops that dominate these
    models; elementwise work is not counted. None where counting is not supported.
    """
    from torch.utils.flop_counter import FlopCounterMode

    try:
        counter = FlopCounterMode(display=False)
        with counter:
            workload.loss(model(x), y).backward()
        model.zero_grad(set_to_none=True)
        return int(counter.get_total_flops() // x.shape[0])
    except Exception:  # an op the counter cannot trace must not fail the run
        model.zero_grad(set_to_none=True)
        return None


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
    faults = FaultInjector(env.rank)
    torch.manual_seed(config.seed)
    model = workload.build_model(data.meta)
    train_x = data.train_x
    if config.channels_last and train_x.dim() == 4:
        # Once for the whole in-memory set, so batches come out channels_last for free.
        model = model.to(memory_format=torch.channels_last)
        train_x = train_x.contiguous(memory_format=torch.channels_last)
    flops_per_sample = count_flops_per_sample(
        model, train_x[:2], data.train_y[:2], workload
    )  # off the clock, before any timed work
    pretrain_figures: dict[str, Any] = {}
    pretrain_s = 0.0
    if workload.pretrain is not None:
        # Before the DDP wrap: the phase averages its own updates across ranks, and DDP then
        # starts every replica from rank 0's (identical) pre-trained weights.
        t0 = time.perf_counter()
        pretrain_figures = workload.pretrain(model, data, strategy, config)
        pretrain_s = strategy.max_float(time.perf_counter() - t0)
    model = strategy.wrap(model)
    optimizer = make_optimizer(
        config.optimizer, model.parameters(), config.lr, config.momentum, config.weight_decay
    )
    steps_per_epoch, total_steps = plan_steps(config, data.num_train, env.world_size)
    scheduler = make_scheduler(optimizer, total_steps, config.schedule, config.warmup_fraction)
    eval_every = config.eval_every or max(1, steps_per_epoch // 4)
    # No accuracy claim from synthetic data, ever; none either when evaluation is off.
    can_claim_accuracy = data.kind == "real" and config.evaluate
    num_epochs = math.ceil(total_steps / steps_per_epoch)

    step_times: list[float] = []
    curve: list[tuple[float, float]] = []  # (training clock s, test accuracy)
    epochs: list[dict[str, Any]] = []
    train_clock_s = pretrain_s  # pre-training is training: it is on the clock
    eval_time_s = 0.0
    augment_generator = torch.Generator().manual_seed(config.seed * 1000 + env.rank)
    step = 0
    last_eval_step = -1
    last_accuracy, last_loss, last_f1 = None, None, None

    def run_eval() -> None:
        nonlocal eval_time_s, last_accuracy, last_loss, last_f1, last_eval_step
        last_eval_step = step
        t0 = time.perf_counter()
        last_accuracy, last_loss, last_f1 = evaluate(
            strategy.unwrap(model), data, strategy, config.precision, config.channels_last
        )
        # Ranks run in lock-step; the slowest one's clock is the run's clock at this point.
        clock = strategy.max_float(train_clock_s)
        curve.append((clock, last_accuracy))
        eval_time_s += time.perf_counter() - t0
        progress.log(
            f"step {step}/{total_steps}  train clock {clock:.1f}s  "
            f"test accuracy {last_accuracy:.4f}  test loss {last_loss:.4f}"
        )

    progress.start(total_steps, f"{workload.name} x{env.world_size}")
    model.train()
    for epoch in range(num_epochs):
        epoch_t0 = time.perf_counter()
        epoch_train_s, epoch_eval_s0 = 0.0, eval_time_s
        loss_sum = torch.zeros(())
        t_shuffle = time.perf_counter()
        order = strategy.shard_indices(data.num_train, epoch, config.seed)
        epoch_train_s += time.perf_counter() - t_shuffle
        steps_this_epoch = min(steps_per_epoch, total_steps - step)
        for batch in range(steps_this_epoch):
            t0 = time.perf_counter()
            index = order[batch * config.batch_size : (batch + 1) * config.batch_size]
            x = train_x.index_select(0, index)
            y = data.train_y.index_select(0, index)
            if workload.augment is not None:
                x = workload.augment(x, augment_generator)
            with _autocast(config.precision):
                loss = workload.loss(model(x), y, config.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            dt = time.perf_counter() - t0
            step_times.append(dt)
            epoch_train_s += dt
            train_clock_s += dt
            loss_sum += loss.detach().float()
            step += 1
            faults.after_step(step)
            if step % 10 == 0 or step == total_steps:
                progress.update(step, loss=float(loss.detach()))
            if can_claim_accuracy and step % eval_every == 0 and step != total_steps:
                run_eval()
        if can_claim_accuracy and last_eval_step != step:
            run_eval()  # every epoch ends with an evaluation, for the per-epoch curve
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
    per_rank = strategy.gather_objects(step_times)
    run_step_times = stats.elementwise_max(per_rank)
    facts = worker_facts()
    facts["rank"] = env.rank
    facts["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
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
    timed = step_times_s[config.warmup_steps_untimed :]
    warmup_excluded = bool(timed)
    if not timed:  # a run shorter than the warm-up: report all steps, and say so
        timed = step_times_s
    full_epochs = [e["epoch_time_s"] for e in epochs if e["full"]]
    reached = stats.first_reaching(curve, config.target_accuracy) if real_data else None
    return {
        "samples_per_s": config.global_batch_size * len(timed) / sum(timed),
        "samples_per_s_per_worker": config.batch_size * len(timed) / sum(timed),
        "step_time_s_median": stats.median(timed),
        "step_time_s_p90": stats.percentile(timed, 90),
        "step_time_s_iqr": stats.iqr(timed),
        "num_timed_steps": len(timed),
        "warmup_steps_excluded": config.warmup_steps_untimed if warmup_excluded else 0,
        "epoch_time_s": stats.median(full_epochs) if full_epochs else None,
        "time_to_target_s": reached,
        "target_accuracy": config.target_accuracy,
        "test_accuracy": test_accuracy if real_data else None,
        "test_loss": test_loss if real_data else None,
        "accuracy_curve": [[t, a] for t, a in curve],
        "train_time_s": train_clock_s,
        "eval_time_s": eval_time_s,
        "num_steps": len(step_times_s),
        "num_samples": len(step_times_s) * config.global_batch_size,
        "peak_memory_bytes_per_worker": [w["peak_rss_bytes"] for w in workers],
    }
