"""The baseline of each workload, and each configuration's speedup, efficiency and notes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from trainscale.metrics import stats
from trainscale.metrics.paired import PairedRatio, paired_ratio
from trainscale.metrics.scaling import is_noisy, relative_iqr
from trainscale.reporting import ReportError
from trainscale.reporting.labels import configuration_key
from trainscale.reporting.model import Configuration
from trainscale.reporting.script_notes import data_wait_text
from trainscale.results.records import RunRecord


def default_baseline(configs: Sequence[Configuration]) -> tuple[Configuration | None, str]:
    """A workload's default baseline and the rule that picked it.

    The 1-worker configuration with the fewest cores (the first such one on a tie); without
    a 1-worker configuration, the one with the fewest workers, then cores.
    """
    measured = [c for c in configs if c.samples_per_s_median]
    if not measured:
        return None, "no configuration recorded a throughput"
    single = [c for c in measured if c.workers == 1]
    if single:
        best = min(single, key=lambda c: c.cores)
        return best, "default: the 1-worker configuration with the fewest cores"
    best = min(measured, key=lambda c: (c.workers, c.cores))
    return best, "default: no 1-worker configuration, so the one with the fewest workers and cores"


def find_baseline(
    wanted: str, configs: Sequence[Configuration], runs: Sequence[RunRecord]
) -> Configuration:
    """The configuration `--baseline` names: by label first, then by run id or prefix."""
    text = wanted.strip()
    by_label = [c for c in configs if c.label == text] or [
        c for c in configs if c.label.casefold() == text.casefold()
    ]
    if len(by_label) == 1:
        return by_label[0]
    if len(by_label) > 1:
        raise ReportError(
            f"baseline {wanted!r} names {len(by_label)} configurations; give a run id"
        )
    matches = [r for r in runs if text and r.run_id.startswith(text)]
    if len(matches) > 1 and not any(r.run_id == text for r in matches):
        shown = ", ".join(r.run_id[:12] for r in matches[:5])
        raise ReportError(
            f"baseline run id prefix {wanted!r} matches {len(matches)} runs ({shown})"
        )
    if matches:
        record = next((r for r in matches if r.run_id == text), matches[0])
        if record.status != "completed":
            raise ReportError(
                f"baseline run {record.run_id[:8]} is {record.status}; pick a completed run"
            )
        key = configuration_key(record)
        return next(c for c in configs if c.key == key)
    shown = "; ".join(c.label for c in configs[:8]) + ("; ..." if len(configs) > 8 else "")
    raise ReportError(
        f"baseline {wanted!r} is neither a configuration label nor a run id in this report "
        f"(labels: {shown})"
    )


FULL_EFFICIENCY = 1.0 + 1e-9
"""Efficiency above this (100%, less rounding) is flagged as implausible."""


def above_full_efficiency(config: Configuration, base: Configuration | None) -> bool:
    """Whether a configuration's efficiency per core exceeds 100% against a baseline of the
    same precision on the same kind of device.

    Per core, the hardware it was given: a worker with more threads than the baseline's has
    more than the baseline's cores, so its efficiency per worker passes 100% plausibly (one
    worker of 2 threads at 1.7x one core's speed). A lower precision than the baseline's is
    faster arithmetic, and a GPU against a CPU baseline compares devices: neither is parallel
    efficiency, nor implausible. Nor is a setting on no more cores than the baseline's
    faster than it: that is the same hardware used better (2 pinned processes against 1
    process of 2 threads), not parallel scaling; and on fewer cores than the baseline's, a
    per-core figure above 100% only says the baseline's own cores scaled below linear."""
    if base is not None and _not_parallel_scaling(config, base) is not None:
        return False
    return config.efficiency_per_core is not None and config.efficiency_per_core > FULL_EFFICIENCY


def _not_parallel_scaling(config: Configuration, base: Configuration) -> str | None:
    """Why `config`'s speed against `base` measures something other than parallel
    scaling, so that efficiency above 100% is no sign of a bad measurement: 'precision'
    (faster arithmetic), 'device' (a GPU against a CPU), 'cores' (the baseline's cores,
    used better) or 'fewer cores' (than the baseline's); None when it is parallel scaling."""
    if config.precision != base.precision:
        return "precision"
    if config.device_type != base.device_type:
        return "device"
    if config.cores == base.cores:
        return "cores"
    if config.cores < base.cores:
        return "fewer cores"
    return None


def paired_with_baseline(
    config: Configuration,
    base: Configuration,
    by_round: Callable[[Configuration], Mapping[str, float]] = lambda c: c.samples_per_s_by_round,
) -> PairedRatio | None:
    """`config` against `base`, paired round by round (`metrics.paired`) on a rate per
    round, higher is faster (`by_round`, by default samples/s); None when they share no
    round or `config` is the baseline."""
    if config.key == base.key:
        return None
    ours, theirs = by_round(config), by_round(base)
    keys = list(ours)
    rounds = [{"baseline": theirs.get(key), "config": ours[key]} for key in keys]
    # A round with a busy run on either side is left out while quiet rounds remain.
    busy = [
        {"baseline": key in base.busy_rounds, "config": key in config.busy_rounds} for key in keys
    ]
    paired = paired_ratio(rounds, "baseline", "config", busy=busy)
    return paired if paired.num_rounds else None


def with_speedup(config: Configuration, base: Configuration | None) -> Configuration:
    """`config` with its speedup and efficiencies against `base`, paired figures where they
    share rounds, and its notes."""

    notes: list[str] = []
    speedup = per_worker = per_core = None
    if base is not None and config.samples_per_s_median and base.samples_per_s_median:
        speedup = stats.speedup(base.samples_per_s_median, config.samples_per_s_median)
        # Relative to the baseline's own workers and cores: with the usual 1-worker, 1-core
        # baseline this is speedup / workers and speedup / cores.
        per_worker = stats.efficiency(speedup, 1) * base.workers / config.workers
        per_core = stats.efficiency(speedup, 1) * base.cores / config.cores
        if config.global_batch_size != base.global_batch_size:
            notes.append(
                f"global batch {config.global_batch_size} vs the baseline's "
                f"{base.global_batch_size}: a different optimisation (weak scaling)"
            )
    if config.stalls:
        notes.append(config.stalls)
    # Judged per core, the hardware given (`above_full_efficiency` says why not per worker).
    if base is not None and per_core is not None and per_core > FULL_EFFICIENCY:
        why = _not_parallel_scaling(config, base)
        if why == "precision":
            notes.append(
                f"efficiency {per_core:.0%} is against the baseline's {base.precision}: "
                f"{config.precision} arithmetic is faster, not parallel efficiency"
            )
        elif why == "cores":
            notes.append(
                f"{speedup:.2f}x on the baseline's {config.cores} core(s): the same hardware "
                "used better, not parallel scaling"
            )
        elif why == "fewer cores":
            notes.append(
                f"efficiency {per_core:.0%} per core on {config.cores} core(s) against the "
                f"baseline's {base.cores}: fewer cores than the baseline, whose own cores "
                "scale below linear (expected)"
            )
        elif why is None:  # ('device', a GPU against a CPU baseline, compares devices: no note)
            notes.append(
                f"efficiency {per_core:.0%} is above 100%: implausible; likely the baseline "
                "was slowed (contention or stalls), a different batch, or turbo/cache effects"
            )
    paired = paired_with_baseline(config, base) if base is not None else None
    if paired is not None:
        notes.append(
            f"paired with the baseline ({paired.rounds_note}): "
            f"{paired.verdict_against('the baseline')}"
        )
    spread = relative_iqr(config.samples_per_s)
    noisy_repeats = is_noisy(spread)
    # Texts of unequal length make unequal steps: that spread is the batches', not noise.
    noisy_steps = is_noisy(config.step_time_rel_iqr) and not config.unequal_steps
    if noisy_repeats:
        notes.append(
            f"noisy: throughput IQR across {config.repeats} repeats is {spread:.1%} of the median"
        )
    if noisy_steps:
        notes.append(
            # One decimal: just above the 10% threshold must not read as 10%.
            f"noisy: step-time IQR within runs is {config.step_time_rel_iqr:.1%} of the median"
        )
    if config.unequal_steps:
        spread_text = (
            f", step-time IQR {config.step_time_rel_iqr:.0%} of the median"
            if config.step_time_rel_iqr is not None
            else ""
        )
        notes.append(f"throughput over the mean step: texts of unequal length{spread_text}")
    if config.repeats == 1:
        notes.append("single run: no spread across repeats")
    if config.oversubscribed:
        notes.append(f"oversubscribed: {config.total_threads} threads on {config.cores} cores")
    if config.emulated:
        reached = (
            f"{config.steps_to_target:g} steps ({config.samples_to_target:,.0f} samples) to target"
            if config.steps_to_target is not None and config.samples_to_target is not None
            else "target not reached"
        )
        notes.append(
            f"emulation: {reached}; its clock is one process's, no prediction of how long "
            "N workers take (docs/emulation.md)"
        )
    if config.synthetic:
        notes.append("synthetic data: throughput only, no accuracy")
    # (A script's runs given no --target-accuracy have no target to reach.)
    elif config.target_accuracy is not None and config.num_reached < config.num_evaluated:
        notes.append(f"target reached in {config.num_reached} of {config.num_evaluated} runs")
    if config.num_failed:
        notes.append(f"{config.num_failed} run(s) did not complete")
    notes += script_notes(config)
    notes += busy_notes(config, base, paired)
    return replace(
        config,
        speedup=speedup,
        paired_speedup=paired.median if paired else None,
        paired_speedup_ci=paired.ci if paired else None,
        paired_rounds=paired.num_rounds if paired else 0,
        paired_verdict=paired.verdict_against("the baseline") if paired else None,
        paired_trusted=paired.trusted if paired else True,
        paired_busy_rounds=paired.busy_rounds if paired else 0,
        efficiency_per_worker=per_worker,
        efficiency_per_core=per_core,
        is_baseline=base is not None and config.key == base.key,
        noisy=noisy_repeats or noisy_steps,
        notes=notes,
    )


def script_notes(config: Configuration) -> list[str]:
    """A script configuration's data wait (with the advice when it is input-bound) and what
    its ranks disagreed on; nothing for a built-in workload's."""
    notes = list(config.disagreements)
    if config.data_wait_share is not None:
        wait = data_wait_text(
            {
                "data_wait_share": config.data_wait_share,
                "data_wait_s_median": config.data_wait_s_median,
            }
        )
        notes.insert(0, f"data wait {wait}")
    return notes


def busy_notes(
    config: Configuration, base: Configuration | None, paired: PairedRatio | None = None
) -> list[str]:
    """Why a configuration's speedup is not trusted: its runs, or the baseline's, ran while
    other work used their cores (docs/methodology.md, "Contention"). Figures stay shown.
    The plain speedup (medians over every repeat) takes the busy runs in, so it is not
    trusted; a paired speedup leaves their rounds out while quiet rounds remain."""
    notes = []
    if config.busy_runs:
        notes.append(
            f"busy machine: {config.busy_runs} of {config.repeats} run(s) shared their cores "
            "with other work; speedup not trusted"
        )
    if base is not None and base.key != config.key and base.busy_runs:
        notes.append("the baseline ran on a busy machine; speedup not trusted")
    if paired is not None and paired.busy_rounds:
        notes.append(
            f"paired speedup: {paired.busy_rounds} busy round(s) left out"
            if paired.trusted
            else "paired speedup: every shared round had a busy run, not trusted"
        )
    return notes
