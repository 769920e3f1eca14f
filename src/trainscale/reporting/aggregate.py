"""Group stored runs into configurations and compute every figure of a report. Pure: no I/O.

A configuration is a set of runs that trained the same way: equal resolved-config hashes
(the tag, a label, is not part of the hash). Its figures are medians over its completed runs
(the repeats), with a spread:

- throughput: median over the repeats of each run's samples/s (its global batch over its
  median timed step, `metrics.throughput`), and its IQR across repeats;
- step time: the median over repeats of each run's median step, and of each run's step-time
  IQR as a fraction of its median (the within-run spread the bench reports);
- speedup: median samples/s over the baseline configuration's median samples/s;
- paired speedup: where runs carry a repeat index (a sweep's repeats, a bench's rounds),
  the ratio to the baseline's run of the same round, median over rounds with a 95%
  bootstrap interval and a verdict (`metrics.paired`; docs/methodology.md);
- efficiency: speedup over the growth in workers, and over the growth in cores, relative to
  the baseline (with a 1-worker, 1-core baseline: speedup / workers and speedup / cores);
- time to target: median over the repeats that reached the target (how many did is shown);
- accuracy and time to target only from real data: synthetic data makes no accuracy claim;
- peak memory: the largest worker's peak resident set, median over repeats.

A configuration is flagged noisy when its throughput IQR across repeats, or its typical
within-run step-time IQR, exceeds 10% of the median (`metrics.scaling.NOISY_RELATIVE_IQR`);
its notes say when runs stalled (mean step far above the median, `metrics.run_flags`) and
when its efficiency exceeds 100%, which parallel training cannot honestly reach.

This module groups and summarises; `labels` names configurations, `baseline` picks each
workload's baseline and computes speedups, `compare` fits Amdahl's law and builds the
processing-time table.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from trainscale.frameworks import FRAMEWORKS
from trainscale.hardware.prices import PriceTable
from trainscale.metrics import stats
from trainscale.metrics.run_flags import STALL_RATIO, has_stalls, ran_busy, stalls_note
from trainscale.reporting import ReportError
from trainscale.reporting.baseline import (
    above_full_efficiency,
    default_baseline,
    find_baseline,
    with_speedup,
)
from trainscale.reporting.compare import affinity_table, amdahl_over_baseline, series_of
from trainscale.reporting.hardware import configuration_figures, cost_sentence, price_note
from trainscale.reporting.labels import (
    configuration_key,
    labels_from_differences,
    unique_labels,
    value_text,
)
from trainscale.reporting.model import (
    Configuration,
    NotCompleted,
    ReportData,
    WorkloadSection,
)
from trainscale.reporting.script_notes import INPUT_BOUND_SHARE, disagreement_text
from trainscale.results.records import RunRecord
from trainscale.results.stored_figures import StoredFigures
from trainscale.results.stored_settings import StoredSettings

BREAKDOWN_PARTS = ("data", "forward", "backward", "optimizer", "exposed_comm")
"""The usual parts of `summary["breakdown_s"]` (median seconds per step), in stacking order;
other keys a run records are stacked after them."""

BREAKDOWN_NOT_SECONDS = frozenset({"num_sampled_steps"})
"""Keys runs stored before `breakdown_sampled_steps` existed kept among their breakdown's
seconds: a count, never a part of the step."""


def aggregate(
    runs: Sequence[RunRecord],
    *,
    title: str,
    source: str,
    labels: Mapping[str, str] | None = None,
    baseline: str | None = None,
    sweep_id: str | None = None,
    prices: PriceTable | None = None,
) -> ReportData:
    """The report's figures from stored runs, configurations in the order runs first show them.

    `labels` maps configuration keys (config hashes) to names, e.g. a sweep plan's labels;
    configurations without one are named by the config keys that differ between them.
    `baseline` is a configuration label or a run id (prefix) of a completed run; by default
    each workload's baseline is its 1-worker configuration with the fewest cores.
    `prices` (dollars per device-hour) gives each configuration its cost; None leaves it out.
    Raises ReportError when no run completed or the baseline matches nothing (or several).
    """
    if not runs:
        raise ReportError(f"{source}: no runs to report")
    groups: dict[str, list[RunRecord]] = {}
    for record in runs:
        groups.setdefault(configuration_key(record), []).append(record)
    completed = {key: [r for r in rs if r.status == "completed"] for key, rs in groups.items()}
    if not any(completed.values()):
        statuses = sorted({r.status for r in runs})
        first = next((r.error for r in runs if r.error), None)
        why = f"; first failure: {first}" if first else ""
        raise ReportError(
            f"{source}: no completed runs ({len(runs)} run(s), {'/'.join(statuses)}){why}"
        )
    names = dict(labels or {})
    # Named by what differs within their workload's section: across workloads every key
    # differs, and labels of every setting would cut to one text in a plot's legend.
    missing: dict[str, dict[str, Any]] = {}
    for config_key, records in groups.items():
        if config_key not in names:
            shown = _representative(records)
            missing.setdefault(shown.workload or "?", {})[config_key] = shown.config
    for configs in missing.values():
        names.update(labels_from_differences(configs, taken=set(names.values())))
    names = unique_labels(names)

    not_completed = _not_completed(runs, names)
    configs = {
        key: _configuration(key, names[key], rs, len(groups[key]) - len(rs), prices)
        for key, rs in completed.items()
        if rs
    }
    chosen = find_baseline(baseline, list(configs.values()), runs) if baseline else None

    sections = []
    # With several frameworks, each framework's runs of a workload are a section of their own,
    # with its own baseline (its own 1-worker run): the speedup a framework's users get.
    several = len({c.framework for c in configs.values()}) > 1
    # Two scripts of one file name (script:train.py) in two folders are two workloads.
    keys = dict.fromkeys(_section_key(c) for c in configs.values())
    named_alike = Counter(key[:2] for key in keys)
    for key in keys:
        workload, framework, script = key
        members = [c for c in configs.values() if _section_key(c) == key]
        # Named by its framework beside others, or when that is not PyTorch (a JAX-only
        # report must not read as PyTorch's).
        in_framework = several or framework != "pytorch"
        name = f"{workload} in {framework_label(framework)}" if in_framework else workload
        if script is not None and named_alike[key[:2]] > 1:
            name += f" ({script})"
        sections.append(_section(name, members, chosen, baseline))
    return ReportData(
        title=title,
        source=source,
        sweep_id=sweep_id,
        workloads=sections,
        not_completed=not_completed,
        machines=_machines(r for r in runs if r.status == "completed"),
        notes=_report_notes(sections, runs) + _hardware_notes(sections, prices),
    )


def _section_key(config: Configuration) -> tuple[str, str, str | None]:
    """What a report section holds: a workload in a framework; a script by its path."""
    script = config.config.get("script")
    return config.workload, config.framework, None if script is None else str(script)


def framework_label(name: str) -> str:
    """How a report names a framework (its own spelling; an unknown name as stored)."""
    known = FRAMEWORKS.get(name)
    return known.label if known else name


def _representative(records: Sequence[RunRecord]) -> RunRecord:
    # A completed run knows its config best; a failed one may have been stored without it.
    return next((r for r in records if r.status == "completed"), records[0])


def _not_completed(runs: Sequence[RunRecord], names: Mapping[str, str]) -> list[NotCompleted]:
    done = {
        (configuration_key(r), r.repeat_index)
        for r in runs
        if r.status == "completed" and r.repeat_index is not None
    }
    out = []
    for record in runs:
        if record.status == "completed":
            continue
        key = configuration_key(record)
        if record.status == "running":
            reason = "still running (or its process was killed before it could record why)"
        else:
            reason = record.error or "no reason recorded"
        out.append(
            NotCompleted(
                run_id=record.run_id,
                label=names.get(key, key),
                workload=record.workload,
                status=record.status,
                reason=reason,
                retried=record.repeat_index is not None and (key, record.repeat_index) in done,
            )
        )
    return out


def _configuration(
    key: str,
    label: str,
    runs: Sequence[RunRecord],
    failed: int,
    prices: PriceTable | None = None,
) -> Configuration:
    first = runs[0]
    config = first.config
    settings = first.settings
    workers = first.world_size or settings.workers or 1
    threads = first.threads_per_worker or settings.threads_per_worker
    total_threads, cores, oversubscribed = _cores(first, workers, threads)

    def numbers(
        figure: Callable[[StoredFigures], float | None], records: Iterable[RunRecord] = runs
    ) -> list[float]:
        return [v for r in records if (v := figure(r.figures)) is not None]

    rates = numbers(lambda f: f.samples_per_s)
    steps = numbers(lambda f: f.step_time_s_median)
    step_spreads = numbers(lambda f: f.step_time_rel_iqr)
    # No accuracy claim from synthetic data, whatever its summary happens to hold.
    real_runs = [r for r in runs if r.data_kind == "real"]
    evaluated = [r for r in real_runs if r.figures.evaluated]
    reached = numbers(lambda f: f.time_to_target_s, evaluated)
    accuracies = numbers(lambda f: f.test_accuracy, evaluated)
    memory = numbers(lambda f: f.peak_memory_bytes)
    targets = numbers(lambda f: f.target_accuracy, evaluated)
    time_to_target_s = stats.median(reached) if reached else None
    steps_to_target = numbers(lambda f: f.steps_to_target, evaluated)
    samples_to_target = numbers(lambda f: f.samples_to_target, evaluated)
    by_round = _by_round(evaluated, lambda f: f.time_to_target_s)
    if isinstance(config.get("emulation"), dict):
        # One process's clock, no prediction of N workers' time (docs/emulation.md): an
        # emulation reaches its target in steps and samples, and has no cost to it.
        reached, time_to_target_s, by_round, prices = steps_to_target, None, {}, None
    return Configuration(
        key=key,
        label=label,
        workload=first.workload or "?",
        data_kind=first.data_kind,
        workers=workers,
        threads_per_worker=threads,
        threads_setting=value_text("threads_per_worker", config.get("threads_per_worker", threads)),
        affinity=first.affinity,
        pinned=bool(settings.core_sets) or (first.affinity not in (None, "none")),
        total_threads=total_threads,
        cores=cores,
        oversubscribed=oversubscribed,
        precision=first.precision,
        global_batch_size=first.global_batch_size,
        config=config,
        run_ids=[r.run_id for r in runs],
        num_failed=failed,
        samples_per_s=rates,
        samples_per_s_median=stats.median(rates) if rates else None,
        samples_per_s_iqr=stats.iqr(rates) if len(rates) > 1 else None,
        samples_per_s_by_round=_by_round(runs, lambda f: f.samples_per_s),
        time_to_target_s_by_round=by_round,
        busy_rounds=frozenset(_round_key(r) for r in runs if ran_busy(r.summary)),
        step_time_s_median=stats.median(steps) if steps else None,
        step_time_rel_iqr=stats.median(step_spreads) if step_spreads else None,
        unequal_steps=any(r.figures.unequal_steps for r in runs),
        train_time_s=stats.median(t) if (t := numbers(lambda f: f.train_time_s)) else None,
        test_accuracy=stats.median(accuracies) if accuracies else None,
        target_accuracy=targets[0] if targets else None,
        time_to_target_s=time_to_target_s,
        num_reached=len(reached),
        num_evaluated=len(evaluated),
        peak_memory_bytes=stats.median(memory) if memory else None,
        accuracy_curves=[
            list(r.figures.accuracy_curve) for r in evaluated if r.figures.accuracy_curve
        ],
        breakdown_s=_breakdown(runs),
        steps_to_target=stats.median(steps_to_target) if steps_to_target else None,
        samples_to_target=stats.median(samples_to_target) if samples_to_target else None,
        stalled_runs=sum(has_stalls(r.summary) for r in runs),
        # The stalled run's own mean and median, in the words of every table.
        stalls=stalls_note([r.summary for r in runs]),
        busy_runs=sum(ran_busy(r.summary) for r in runs),
        framework=first.framework,
        data_wait_share=stats.median(w) if (w := numbers(lambda f: f.data_wait_share)) else None,
        data_wait_s_median=(
            stats.median(w) if (w := numbers(lambda f: f.data_wait_s_median)) else None
        ),
        disagreements=list(dict.fromkeys(d for r in runs if (d := disagreement_text(r.summary)))),
        epochs_trained=_epochs_trained(runs, settings),
        **configuration_figures(runs, cores, time_to_target_s, prices),
    )


def _by_round(
    runs: Sequence[RunRecord], figure: Callable[[StoredFigures], float | None]
) -> dict[str, float]:
    """A summary figure (samples/s, time to target) per round: runs with a repeat index,
    keyed by their sweep (or, outside a sweep, their tag: a bench's) and repeat index, so
    that rounds of different sweeps or benches reported together are never paired with each
    other; the median where a round holds several runs."""
    per_round: dict[str, list[float]] = {}
    for record in runs:
        value = figure(record.figures)
        if record.repeat_index is None or value is None or value <= 0:
            continue
        per_round.setdefault(_round_key(record), []).append(value)
    return {key: stats.median(values) for key, values in per_round.items()}


def _round_key(record: RunRecord) -> str:
    """The round a run belongs to: its sweep (or tag: a bench's) and repeat index."""
    return json.dumps([record.sweep_id, record.tag, record.repeat_index])


def _cores(record: RunRecord, workers: int, threads: int | None) -> tuple[int, int, bool]:
    """(threads in all, cores given, oversubscribed) of a run.

    Cores given are workers x threads, but no more than the cores the workers could run on:
    the union of the cores they reported, else their planned core sets, else the machine's
    usable cores. More threads than that is oversubscription.
    """
    total = workers * (threads or 1)
    core_ids = set(record.figures.worker_cores)
    if not core_ids:
        for cores in record.settings.core_sets:
            core_ids.update(cores)
    if not core_ids:
        core_ids.update(record.machine.usable_cores)
    if not core_ids:
        return total, total, record.settings.oversubscribed
    oversubscribed = total > len(core_ids) or record.settings.oversubscribed
    return total, min(total, len(core_ids)), oversubscribed


def _breakdown(runs: Sequence[RunRecord]) -> dict[str, float] | None:
    per_part: dict[str, list[float]] = {}
    for record in runs:
        for name, seconds in record.figures.breakdown_s.items():
            if name not in BREAKDOWN_NOT_SECONDS:
                per_part.setdefault(name, []).append(seconds)
    if not per_part:
        return None
    order = [p for p in BREAKDOWN_PARTS if p in per_part] + sorted(
        p for p in per_part if p not in BREAKDOWN_PARTS
    )
    return {name: stats.median(per_part[name]) for name in order}


def _epochs_trained(runs: Sequence[RunRecord], settings: StoredSettings) -> float | None:
    """Median over `runs` of the epochs each trained (see `Configuration.epochs_trained`)."""
    epochs = settings.epochs
    if settings.steps is not None or epochs is None:
        return None
    trained = []
    for record in runs:
        steps, planned = record.figures.num_steps, record.figures.planned_steps
        # A run stored before planned steps were recorded trained its whole length.
        share = steps / planned if steps is not None and planned else 1
        trained.append(epochs * share)
    return stats.median(trained) if trained else None


def _section(
    workload: str,
    members: list[Configuration],
    chosen: Configuration | None,
    wanted: str | None,
) -> WorkloadSection:
    base: Configuration | None
    if chosen is not None and chosen.workload == members[0].workload:
        if not chosen.samples_per_s_median:
            raise ReportError(f"baseline {wanted!r} recorded no throughput; pick another")
        base, rule = chosen, f"chosen with --baseline {wanted}"
    else:
        base, rule = default_baseline(members)
    configs = [with_speedup(c, base) for c in members]
    series = series_of(configs)
    fit, fit_note = amdahl_over_baseline(configs, series, base)
    rows, affinity_note = affinity_table(configs)
    base = next((c for c in configs if base is not None and c.key == base.key), None)
    return WorkloadSection(
        workload=workload,
        configurations=configs,
        baseline=base,
        baseline_rule=rule,
        series=series,
        amdahl=fit,
        amdahl_note=fit_note,
        affinity_rows=rows,
        affinity_note=affinity_note,
    )


def _machines(runs: Iterable[RunRecord]) -> list[dict[str, Any]]:
    """Each machine the runs ran on, with the frameworks other than PyTorch that trained
    there ('jax 0.10.2'): torch's release is the machine's own line."""
    seen: dict[str, dict[str, Any]] = {}
    for record in runs:
        facts = record.machine
        machine = {
            "cpu_model": facts.cpu_model,
            "logical_cores": facts.logical_cores,
            "torch_version": facts.torch_version,
            "hostname": facts.hostname,
        }
        entry = seen.setdefault(
            json.dumps(machine, sort_keys=True, default=str), {**machine, "frameworks": []}
        )
        if record.framework != "pytorch":
            text = " ".join(filter(None, (record.framework, record.framework_version)))
            if text not in entry["frameworks"]:
                entry["frameworks"].append(text)
    return list(seen.values())


def _report_notes(sections: Sequence[WorkloadSection], runs: Sequence[RunRecord]) -> list[str]:
    notes = []
    configs = [c for s in sections for c in s.configurations]
    busy = sum(c.busy_runs for c in configs)
    if busy:  # first: it changes how every speedup below reads
        completed = sum(c.repeats for c in configs)
        notes.append(
            f"{busy} of {completed} completed run(s) ran on a busy machine (other work used "
            "their cores): their figures are shown, but they are kept out of speedup "
            "verdicts (their configurations' speedups are marked not trusted) and out of "
            "`trainscale recommend`."
        )
    if any(c.synthetic for c in configs):
        notes.append(
            "Some configurations trained on synthetic data: their throughput is real, but they "
            "make no accuracy claim and show no accuracy or time to target."
        )
    hosts = {r.machine.hostname for r in runs if r.status == "completed"}
    cpus = {r.machine.cpu_model for r in runs if r.status == "completed"}
    if len(hosts - {None}) > 1 or len(cpus - {None}) > 1:
        notes.append(
            "The runs come from more than one machine: a speedup only compares runs made on "
            "the same machine."
        )
    noisy = [c.label for c in configs if c.noisy]
    if noisy:
        notes.append(
            f"{len(noisy)} configuration(s) are noisy (spread above 10% of the median): "
            "treat their figures with care, or repeat them."
        )
    stalled = [c.label for c in configs if c.stalls]
    if stalled:
        notes.append(
            f"{len(stalled)} configuration(s) had runs with stalls (mean step more than "
            f"{STALL_RATIO:.2f}x the median): throughput is the batch over the median step, "
            "which the stalls do not move; their notes give the mean beside it."
        )
    input_bound = [
        c.label
        for c in configs
        if c.data_wait_share is not None and c.data_wait_share > INPUT_BOUND_SHARE
    ]
    if input_bound:
        notes.append(
            f"{len(input_bound)} script configuration(s) are input-bound "
            f"({', '.join(input_bound)}): their steps waited for data more than "
            f"{INPUT_BOUND_SHARE:.0%} of the time, so "
            "their speed is the data pipeline's more than the model's; their notes say what "
            "to try."
        )
    if any(c.disagreements for c in configs):
        notes.append(
            "Some script runs' ranks disagreed (different samples= in a step, or different "
            "numbers of steps): their notes say what differs and what it does to the throughput."
        )
    implausible = [
        c.label for s in sections for c in s.configurations if above_full_efficiency(c, s.baseline)
    ]
    if implausible:
        notes.append(
            f"{len(implausible)} configuration(s) show efficiency above 100% "
            f"({', '.join(implausible)}): implausible for data-parallel training. Likely "
            "causes: a baseline slowed by contention or stalls, a different batch, or "
            "turbo and cache effects (a smaller share of the data per worker fits in cache)."
        )
    return notes


def _hardware_notes(sections: Sequence[WorkloadSection], prices: PriceTable | None) -> list[str]:
    """Which prices the costs use, per workload whether its GPU run costs less, and MFU
    above 100% said to be what it is."""
    configs = [c for s in sections for c in s.configurations]
    notes = [note] if (note := price_note(prices, configs)) else []
    beyond = [c.label for c in configs if c.mfu is not None and c.mfu > 1]
    if beyond:
        notes.append(
            f"{len(beyond)} configuration(s) show MFU above 100% ({', '.join(beyond)}): more "
            "than a theoretical peak allows, so that peak is below what the devices did. A "
            "CPU peak at the clock /proc/cpuinfo reports (where no maximum clock is visible, "
            "as in many VMs; its source says so) is, where the cores boost above that clock. "
            "MFU against what `trainscale probe` measured here (mfu_vs_probe) depends on no "
            "clock."
        )
    for section in sections:
        sentence = cost_sentence(section.configurations)
        if sentence:
            notes.append(f"{section.workload}: {sentence}")
    return notes
