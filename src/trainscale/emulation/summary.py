"""An emulation's stored summary: the usual accuracy fields plus `emulation`
(docs/emulation.md), made from what the training loop measured."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainscale.config.options import RunConfig
from trainscale.emulation.spec import EmulationSpec
from trainscale.metrics import stats
from trainscale.results.run_result import EmulationMetrics
from trainscale.train.loop import LoopOutcome
from trainscale.train.plan import StepPlan
from trainscale.train.records import Evaluation
from trainscale.train.setup import Pretraining
from trainscale.train.summary import resolved_target


def emulation_summary(
    config: RunConfig,
    spec: EmulationSpec,
    plan: StepPlan,
    loop: LoopOutcome,
    mode_figures: Mapping[str, Any],
    pretraining: Pretraining | None,
    peak_rss_bytes: int,
) -> EmulationMetrics:
    """The measurements of one emulation (the worker's facts join them in a RunResult).

    Steps to target is the first evaluated global step whose test accuracy reaches the
    target; samples to target is that step x B.
    """
    target = resolved_target(config)
    samples_per_step = spec.samples_per_step
    steps_curve = [
        [point.step, point.step * samples_per_step, point.accuracy] for point in loop.curve
    ]
    reached = next((int(s) for s, _, accuracy in steps_curve if accuracy >= target), None)
    final = loop.final or Evaluation(math.nan, math.nan, math.nan)
    curve = [(point.clock_s, point.accuracy) for point in loop.curve]
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
        "eval_every": loop.eval_every,
        "steps_curve": steps_curve,
        **mode_figures,
    }
    return EmulationMetrics(
        test_accuracy=final.accuracy,
        test_loss=final.loss,
        test_macro_f1=final.macro_f1,
        target_accuracy=target,
        time_to_target_s=stats.first_reaching(curve, target),
        accuracy_curve=[[t, a] for t, a in curve],
        train_time_s=loop.train_clock_s,
        eval_time_s=loop.eval_time_s,
        num_steps=plan.total_steps,
        num_samples=plan.total_steps * samples_per_step,
        emulation=emulation,
        pretrain_time_s=pretraining.seconds if pretraining else None,
        peak_memory_bytes_per_worker=[peak_rss_bytes],
    )
