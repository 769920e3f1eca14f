"""A run's summary: the stored headline figures, made from the loop's raw measurements.

The rules are docs/methodology.md's: the first `warmup_steps_untimed` steps are left out of
the step-time statistics and the throughput (but were on the training clock); each step's
time is the slowest rank's; the run's step time is the median timed step and its throughput
the batch over it (`metrics.throughput`; over the mean step where the workload's steps do
unequal work by design), the mean kept beside them; time to target is the
training clock at the first evaluation reaching the target; no accuracy figure without a
claim (synthetic data, evaluation off).
The summary's keys and their order are what the store, reports, exports and the simulator
read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainscale.config.options import RunConfig
from trainscale.metrics import stats
from trainscale.metrics.flops import FlopCount
from trainscale.metrics.throughput import (
    mean_step_time,
    rated_step_time,
    throughput,
    timed_step_time,
)
from trainscale.results.run_result import RunMetrics
from trainscale.train.breakdown import breakdown_fields
from trainscale.train.records import CurvePoint, EpochRecord, Evaluation


@dataclass(frozen=True)
class TrainMeasurements:
    """Everything a run's summary is made from, as the loop and the ranks' gathers left it."""

    global_batch_size: int
    per_worker_batch_size: int
    warmup_steps_untimed: int
    target_accuracy: float
    step_times_s: Sequence[float]
    """Every step's time, the slowest rank's, warm-up steps included."""
    curve: Sequence[CurvePoint]
    epochs: Sequence[EpochRecord]
    train_clock_s: float
    """The whole training clock (slowest rank's), pre-training included."""
    eval_time_s: float
    evaluated: bool
    """Whether the run may claim accuracy (real data, evaluation on)."""
    final: Evaluation | None
    """The last evaluation, None when there was none."""
    workers: Sequence[Mapping[str, Any]]
    """Each rank's facts, rank order: `peak_rss_bytes`, and `peak_gpu_bytes` on GPUs."""
    breakdowns: Sequence[Mapping[str, Any]]
    """Each rank's per-phase medians ({} where no step was sampled)."""
    comm_marked: bool
    """Whether a communication hook measured exposed communication."""
    breakdown_sampled_steps: int
    """How many steps each rank's breakdown sampled (0: the breakdown was off)."""
    flops: FlopCount | None
    """Training FLOPs per sample, in all and by operator kind; None where not counted."""
    pretrain_s: float | None
    """The pre-training phase's time (slowest rank's); None without a phase."""
    compile_s: float | None
    device_warmup_s: float | None = None
    """The GPU warm-up pass before the first step (train/warmup.py), off the clock."""
    planned_steps: int | None = None
    """The steps the plan held (`num_steps` is fewer when the run stopped at its target)."""
    stopped_at_target: bool = False
    """Whether the loop ended at the first evaluation that reached the target."""
    unequal_steps: bool = False
    """Whether the steps do unequal work by design (`Workload.unequal_steps`): the
    throughput is then the batch over the mean timed step."""


def resolved_target(config: RunConfig) -> float:
    """The run's target accuracy: asked for, or the workload's, which `resolve()` fills in."""
    target = config.measurement.target_accuracy
    if target is None:
        raise ValueError("an unresolved config: it has no target accuracy")
    return target


def summarize(m: TrainMeasurements) -> RunMetrics:
    """The run's headline numbers (see the module docstring)."""
    timed = list(m.step_times_s[m.warmup_steps_untimed :])
    warmup_excluded = bool(timed)
    if not timed:  # a run shorter than the warm-up: report all steps, and say so
        timed = list(m.step_times_s)
    full_epochs = [e.epoch_time_s for e in m.epochs if e.full]
    curve = [(point.clock_s, point.accuracy) for point in m.curve]
    final = m.final if m.evaluated else None
    reached = stats.first_reaching(curve, m.target_accuracy) if m.evaluated else None
    num_steps = len(m.step_times_s)
    step_s, mean_s = timed_step_time(timed), mean_step_time(timed)
    rate_step_s = rated_step_time(timed, m.unequal_steps)
    breakdown = breakdown_fields(list(m.breakdowns), m.breakdown_sampled_steps, m.comm_marked)
    return RunMetrics(
        samples_per_s=throughput(m.global_batch_size, rate_step_s),
        samples_per_s_per_worker=throughput(m.per_worker_batch_size, rate_step_s),
        step_time_s_median=step_s,
        step_time_s_mean=mean_s,
        samples_per_s_mean=throughput(m.global_batch_size, mean_s),
        step_time_s_p90=stats.percentile(timed, 90),
        step_time_s_iqr=stats.iqr(timed),
        num_timed_steps=len(timed),
        warmup_steps_excluded=m.warmup_steps_untimed if warmup_excluded else 0,
        epoch_time_s=stats.median(full_epochs) if full_epochs else None,
        time_to_target_s=reached,
        target_accuracy=m.target_accuracy,
        test_accuracy=final.accuracy if final else None,
        test_loss=final.loss if final else None,
        accuracy_curve=[[t, a] for t, a in curve],
        train_time_s=m.train_clock_s,
        eval_time_s=m.eval_time_s,
        num_steps=num_steps,
        num_samples=num_steps * m.global_batch_size,
        planned_steps=m.planned_steps,
        stopped_at_target=m.stopped_at_target,
        peak_memory_bytes_per_worker=[w["peak_rss_bytes"] for w in m.workers],
        peak_gpu_memory_bytes_per_worker=(
            [w["peak_gpu_bytes"] for w in m.workers] if "peak_gpu_bytes" in m.workers[0] else None
        ),
        test_macro_f1=final.macro_f1 if final else None,
        flops_per_sample=None if m.flops is None else m.flops.per_sample,
        flops_per_sample_by_kind=None if m.flops is None else dict(m.flops.by_kind),
        pretrain_time_s=m.pretrain_s,
        supervised_time_s=m.train_clock_s - (m.pretrain_s or 0.0),
        compile_time_s=m.compile_s,
        device_warmup_s=m.device_warmup_s,
        breakdown_s=breakdown["breakdown_s"],
        breakdown_sampled_steps=breakdown["breakdown_sampled_steps"],
        unequal_steps=m.unequal_steps,
    )
