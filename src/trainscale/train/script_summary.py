"""A script run's summary: every rank's meter readings made into the stored figures by the
same rules (and the same `summarize`) as a built-in workload's, plus the data wait.

Each step's time is the slowest rank's; the global batch is the samples all ranks trained
on in a step (the median over the timed steps, as a script's last batch may be short).
The data-wait share is the fraction of the timed steps' time the ranks spent waiting for
their data: the slowest rank's share, each rank's kept beside it.

Each rank's peak GPU memory is stored as a built-in GPU run's is
(`peak_gpu_memory_bytes_per_worker`), where the script used CUDA.

Where the ranks disagree, the summary says so rather than hiding it: `samples=` that differ
across ranks in the same step (a rank that passes the global batch where the others pass
their own part makes the summed global batch, and the throughput, too large), and ranks that
took different numbers of steps (the figures then cover the steps every rank took).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from trainscale.errors import WorkloadError
from trainscale.metrics import stats
from trainscale.results.run_result import RunMetrics
from trainscale.train.meter import ScriptMeasurements
from trainscale.train.records import CurvePoint, Evaluation
from trainscale.train.summary import TrainMeasurements, summarize

NO_TARGET = 1.0
"""The target accuracy of a script run given none: time to target is then only reached at
perfect accuracy (the summary's `target_accuracy_given` says it was not asked for)."""


@dataclasses.dataclass(frozen=True)
class ScriptSummary:
    """What rank 0 stores of a script run."""

    metrics: RunMetrics
    step_times_s: list[float]
    """Every step's time (slowest rank), warm-up steps included."""
    extra: dict[str, Any]
    """The summary keys only a script run has: the data wait, the steps and samples of each
    rank and whether they disagree, the frameworks the script used, and the sizes of the
    model's trainable parameters where the script gave the meter its model
    (`model_parameters`, for the simulator)."""


def summarize_script(
    per_rank: Sequence[ScriptMeasurements],
    workers: Sequence[Mapping[str, Any]],
    warmup_steps_untimed: int,
    target_accuracy: float | None,
) -> ScriptSummary:
    """The run's figures from every rank's measurements (rank order). Ranks that took a
    different number of steps are compared over the steps they all took. A worker's facts
    may name the frameworks its script imported (`frameworks`: name to version)."""
    steps_per_rank = [len(m.step_times_s) for m in per_rank]
    num = min(steps_per_rank)
    step_times = stats.elementwise_max([m.step_times_s[:num] for m in per_rank])
    waits = stats.elementwise_max([m.data_wait_s[:num] for m in per_rank])
    global_samples = [sum(step) for step in zip(*(m.samples[:num] for m in per_rank), strict=True)]
    timed = slice(warmup_steps_untimed, None) if num > warmup_steps_untimed else slice(None)
    counted = stats.median(global_samples[timed])
    if counted <= 0:
        raise WorkloadError(
            "the script counted 0 samples in its timed steps: give each step the samples it "
            "trained, `meter.step(samples=len(batch))` (docs/own-scripts.md)"
        )
    global_batch = max(1, round(counted))
    main = per_rank[0]  # rank 0's evaluations, as a built-in run's are the main rank's
    final = main.curve[-1][2] if main.curve else None
    metrics = summarize(
        TrainMeasurements(
            global_batch_size=global_batch,
            per_worker_batch_size=max(1, round(global_batch / len(per_rank))),
            warmup_steps_untimed=warmup_steps_untimed,
            target_accuracy=NO_TARGET if target_accuracy is None else target_accuracy,
            step_times_s=step_times,
            curve=[CurvePoint(clock, step, acc) for clock, step, acc in main.curve],
            epochs=[],
            train_clock_s=max(m.train_clock_s for m in per_rank),
            eval_time_s=max(m.eval_time_s for m in per_rank),
            evaluated=final is not None,
            final=None if final is None else Evaluation(final, 0.0, 0.0),
            workers=_gpu_peaks_of_all(workers),
            breakdowns=[{} for _ in per_rank],
            comm_marked=False,
            breakdown_sampled_steps=0,
            flops=None,
            pretrain_s=None,
            compile_s=None,
        )
    )
    # The script gives no F1, and its loss only if it passes one.
    metrics = dataclasses.replace(
        metrics,
        test_loss=main.last_loss if final is not None else None,
        test_macro_f1=None,
        num_samples=sum(global_samples),
    )
    shares = [
        _wait_share(m.step_times_s[:num][timed], m.data_wait_s[:num][timed]) for m in per_rank
    ]
    extra = {
        "global_batch_measured": global_batch,
        "data_wait_share": max(shares),
        "data_wait_share_per_worker": shares,
        "data_wait_s_median": stats.median(waits[timed]),
        "steps_per_worker": steps_per_rank,
        "steps_disagree": len(set(steps_per_rank)) > 1,
        **_samples_agreement([m.samples[:num] for m in per_rank], timed),
        "target_accuracy_given": target_accuracy is not None,
        "frameworks": _frameworks(workers),
    }
    if main.model_parameters is not None:
        # Rank 0's model stands for every rank's: DDP keeps the replicas identical.
        extra["model_parameters"] = main.model_parameters
    return ScriptSummary(metrics, step_times, extra)


def _samples_agreement(samples: Sequence[Sequence[int]], timed: slice) -> dict[str, Any]:
    """Each rank's median `samples=` over the timed steps, and in how many of the steps
    every rank took the ranks gave different counts."""
    medians = [stats.median(rank[timed]) for rank in samples]
    differing = sum(len(set(step)) > 1 for step in zip(*samples, strict=True))
    return {
        "samples_per_worker_median": [int(v) if float(v).is_integer() else v for v in medians],
        "samples_disagree": differing > 0,
        "samples_disagree_steps": differing,
    }


def _gpu_peaks_of_all(workers: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The workers' facts with a GPU peak (`peak_gpu_bytes`) on every rank where any rank
    has one, as `summarize` reads them: a rank whose script never initialised CUDA held no
    GPU memory (0); where none did, the run has no GPU figure at all."""
    if not any("peak_gpu_bytes" in worker for worker in workers):
        return list(workers)
    return [{**worker, "peak_gpu_bytes": worker.get("peak_gpu_bytes", 0)} for worker in workers]


def _frameworks(workers: Sequence[Mapping[str, Any]]) -> dict[str, str | None]:
    """The frameworks any rank's script had imported, with their versions."""
    seen: dict[str, str | None] = {}
    for worker in workers:
        seen.update(worker.get("frameworks") or {})
    return seen


def _wait_share(step_times_s: Sequence[float], waits_s: Sequence[float]) -> float:
    total = sum(step_times_s)
    return sum(waits_s) / total if total > 0 else 0.0
