"""A against B: two stored runs or sweeps, configuration by configuration (`trainscale compare`).

Each side is a run, the completed runs of a sweep (its repeats) grouped by the label of
their configuration, or one configuration of a sweep (`SWEEP:LABEL`, the label its plan and
report use). Matched groups are compared by their timed step times
(`metrics.compare.compare_step_times`: the report's figures, each side's median over its
runs of each run's median step and throughput, a bootstrap interval, a rank test), with
warnings where the comparison is not like with like or a side's runs stalled. A side with a
run on a busy machine follows the busy rule (`metrics.run_flags`): the figures stay, a
warning says so, and the difference is never called significant (`trusted` is False).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainscale.config.limits import (
    DEFAULT_RESAMPLES,
    MAX_RESAMPLES,
    MAX_SEED,
    MIN_RESAMPLES,
    check_count,
)
from trainscale.errors import StoreError, TrainscaleError
from trainscale.metrics.compare import MIN_JUDGED_STEPS, compare_step_times, timed_steps
from trainscale.metrics.run_flags import NOT_TRUSTED, busy_count, stalls_note, trusted
from trainscale.reporting.labels import LABEL_SKIP, differing_keys, labels_from_differences
from trainscale.reporting.script_notes import disagreement_text, is_input_bound
from trainscale.results.records import DamagedRecordError, RunRecord, SweepRecord
from trainscale.results.store import RunStore, default_store_path

FEW_STEPS = 20
"""Below this many timed steps in a run, the comparison says its figures are coarse."""


@dataclass
class Group:
    """The runs that make up one side of one comparison (one run, or a configuration's
    completed repeats)."""

    label: str
    runs: list[RunRecord]
    step_times: list[list[float]] = field(default_factory=list)

    @property
    def workload(self) -> str | None:
        return self.runs[0].workload

    @property
    def global_batch_size(self) -> int | None:
        return self.runs[0].global_batch_size

    @property
    def unequal_steps(self) -> bool:
        """Its steps do unequal work by design: its throughput is over the mean step."""
        return any(run.figures.unequal_steps for run in self.runs)


@dataclass
class Side:
    """One command-line argument, resolved: a run, or a sweep's configurations."""

    kind: str
    """'run' or 'sweep'."""
    ident: str
    """Full id."""
    groups: list[Group]
    """One group for a run or a single-configuration sweep; one per label otherwise."""
    skipped: int = 0
    """Sweep runs left out because they did not complete."""
    config: str | None = None
    """The configuration label picked with `SWEEP:LABEL`; None for a whole sweep or a run."""

    @property
    def name(self) -> str:
        base = f"{self.kind} {self.ident[:8]}"
        return base if self.config is None else f'{base} "{self.config}"'


def resolve_side(store: RunStore, ident: str) -> Side:
    """A run or a sweep by id or unique prefix, or `SWEEP:LABEL` (a sweep by id, unique
    prefix or name, and one of its configurations by its exact label); StoreError or
    TrainscaleError (one line) when it names nothing, or several things."""
    if ":" in ident:
        sweep_part, label = ident.split(":", 1)
        return configuration_side(store, sweep_part, label)
    run: RunRecord | None = None
    sweep = None
    run_error = sweep_error = None
    try:
        run = store.get_run(ident)
    except StoreError as error:
        run_error = error
    try:
        sweep = store.get_sweep(ident)
    except StoreError as error:
        sweep_error = error
    if run is not None and sweep is not None:
        raise StoreError(
            f"{ident!r} matches run {run.short_id} and sweep {sweep.short_id}; give more characters"
        )
    if run is not None:
        _check_completed(run)
        return Side("run", run.run_id, [Group(run.short_id, [run])])
    if sweep is not None:
        return _sweep_side(store, sweep)
    # A damaged row or an ambiguous prefix says more than "not found": show it.
    for problem in (run_error, sweep_error):
        if isinstance(problem, DamagedRecordError):
            raise problem
    for problem in (run_error, sweep_error):
        if problem is not None and "matches" in str(problem):
            raise problem
    raise StoreError(
        f"no run or sweep {ident.strip()!r} in {store.path}; `trainscale runs list` shows the "
        "stored runs"
    )


def find_sweep(store: RunStore, ident: str) -> SweepRecord:
    """A sweep by id or unique id prefix, else by its exact name (one sweep of that name)."""
    try:
        return store.get_sweep(ident)
    except DamagedRecordError:
        raise
    except StoreError as error:
        by_name = [s for s in store.list_sweeps() if s.name == ident.strip()]
        if len(by_name) == 1:
            return by_name[0]
        if len(by_name) > 1:
            ids = ", ".join(s.short_id for s in by_name[:5])
            raise StoreError(
                f"{len(by_name)} sweeps are named {ident.strip()!r} ({ids}); give the sweep id"
            ) from None
        if "matches" in str(error):
            raise
        raise StoreError(
            f"no sweep {ident.strip()!r} (id, id prefix or name) in {store.path}; "
            "`trainscale runs sweeps` lists the stored sweeps"
        ) from None


def configuration_side(store: RunStore, sweep_ident: str, label: str) -> Side:
    """The completed runs of the configuration labelled `label` (exactly) in a sweep."""
    sweep = find_sweep(store, sweep_ident)
    labels = list(dict.fromkeys(entry["label"] for entry in sweep.plan))
    if label not in labels:
        shown = ", ".join(repr(name) for name in labels)
        raise TrainscaleError(
            f"sweep {sweep.short_id} has no configuration {label!r}; its configurations: {shown}"
        )
    hashes = {entry["config_hash"] for entry in sweep.plan if entry["label"] == label}
    runs = [r for r in store.sweep_runs(sweep.sweep_id) if r.config_hash in hashes]
    done = [r for r in runs if r.status == "completed"]
    if not done:
        raise TrainscaleError(
            f"configuration {label!r} of sweep {sweep.short_id} has no completed run to compare"
        )
    return Side("sweep", sweep.sweep_id, [Group(label, done)], len(runs) - len(done), label)


def _check_completed(run: RunRecord) -> None:
    if run.status == "failed":
        raise TrainscaleError(
            f"run {run.short_id} failed ({run.error or 'no reason recorded'}); only completed "
            "runs can be compared"
        )
    if run.status != "completed":
        raise TrainscaleError(
            f"run {run.short_id} is still {run.status}; compare it once it has completed"
        )


def _sweep_side(store: RunStore, sweep: SweepRecord) -> Side:
    labels = {entry["config_hash"]: entry["label"] for entry in sweep.plan}
    groups: dict[str, Group] = {}
    skipped = 0
    for record in store.sweep_runs(sweep.sweep_id):
        if record.status != "completed":
            skipped += 1
            continue
        label = labels.get(record.config_hash, record.config_hash or "?")
        groups.setdefault(label, Group(label, [])).runs.append(record)
    if not groups:
        raise TrainscaleError(f"sweep {sweep.short_id} has no completed run to compare")
    # Plan order, so tables read in the order the sweep was written.
    order = list(dict.fromkeys(entry["label"] for entry in sweep.plan))
    ordered = sorted(groups.values(), key=lambda g: order.index(g.label) if g.label in order else 0)
    return Side("sweep", sweep.sweep_id, ordered, skipped)


def pair_groups(a: Side, b: Side, config: str | None) -> list[tuple[str, Group, Group]]:
    """The (label, group A, group B) pairs to compare, matched by configuration label."""

    def pick(side: Side) -> Group:
        # --config chooses among several configurations; a side with one has nothing to pick.
        if len(side.groups) == 1:
            return side.groups[0]
        matches = [g for g in side.groups if g.label == config]
        if not matches:
            labels = ", ".join(repr(g.label) for g in side.groups)
            raise TrainscaleError(
                f"{side.name} has no completed configuration {config!r}; it has {labels}"
            )
        return matches[0]

    if config is not None:
        if len(a.groups) == 1 and len(b.groups) == 1:
            raise TrainscaleError(
                f"--config {config!r} does not apply: {a.name} and {b.name} have one "
                "configuration each; --config takes the label of one configuration of a "
                "sweep side that has several"
            )
        group_a, group_b = pick(a), pick(b)
        # A one-configuration side may not be that configuration: then say how they differ.
        return [(how_they_differ(group_a, group_b) or config, group_a, group_b)]
    if len(a.groups) == 1 and len(b.groups) == 1:
        group_a, group_b = a.groups[0], b.groups[0]
        if group_a.label == group_b.label:
            return [(group_a.label, group_a, group_b)]
        return [(how_they_differ(group_a, group_b), group_a, group_b)]
    if len(a.groups) > 1 and len(b.groups) > 1:
        by_label = {g.label: g for g in b.groups}
        pairs = [(g.label, g, by_label[g.label]) for g in a.groups if g.label in by_label]
        if not pairs:
            raise TrainscaleError(
                f"{a.name} and {b.name} share no configuration label; pick one on each side "
                "with --config LABEL"
            )
        return pairs
    multi = a if len(a.groups) > 1 else b
    labels = ", ".join(repr(g.label) for g in multi.groups)
    raise TrainscaleError(
        f"{multi.name} has {len(multi.groups)} configurations ({labels}); choose one with "
        "--config LABEL"
    )


def load_steps(store: RunStore, group: Group) -> None:
    """Fill `group.step_times` with each run's timed steps; TrainscaleError if one has none."""
    group.step_times = []
    for record in group.runs:
        warmup = record.figures.warmup_steps_excluded
        steps = [t for t in timed_steps(store.step_times(record.run_id), warmup) if t > 0]
        if not steps:
            raise TrainscaleError(f"run {record.short_id} has no timed steps to compare")
        group.step_times.append(steps)


def refuse_self_comparison(pairs: list[tuple[str, Group, Group]]) -> None:
    """A and B made of the same runs in every pair is a mistake (the same id twice, a
    sweep against itself): a ratio of runs to themselves would look like a result."""
    if pairs and all(_run_ids(a) == _run_ids(b) for _, a, b in pairs):
        runs = sorted({run.short_id for _, a, _ in pairs for run in a.runs})
        shown = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
        raise TrainscaleError(
            f"A and B are the same run(s) ({shown}): a comparison with themselves says "
            "nothing; give two different runs, sweeps or configurations"
        )


def _run_ids(group: Group) -> set[str]:
    return {run.run_id for run in group.runs}


def warnings_for(a: Group, b: Group) -> list[str]:
    """Why a comparison may not be like with like."""
    notes = []
    shared = _run_ids(a) & _run_ids(b)
    if shared:
        notes.append(
            f"A and B share {len(shared)} run(s): the ratio is pulled towards 1 and the "
            "difference understated"
        )
    if a.workload != b.workload:
        notes.append(f"different workloads ({a.workload} vs {b.workload})")
    frameworks = [group.runs[0].framework_text for group in (a, b)]
    if frameworks[0] != frameworks[1]:  # what is compared, said, not a warning against it
        notes.append(f"different frameworks ({frameworks[0]} vs {frameworks[1]})")
    if a.global_batch_size != b.global_batch_size:
        notes.append(
            f"different global batch ({a.global_batch_size} vs {b.global_batch_size}): "
            "throughput ratio is in samples/s, step-time ratio is per step of unequal work"
        )
    machines = {(r.machine.hostname, r.machine.cpu_model) for group in (a, b) for r in group.runs}
    if len(machines) > 1:
        notes.append("runs come from different machines")
    fewest = min(len(steps) for group in (a, b) for steps in group.step_times)
    if fewest < FEW_STEPS:
        notes.append(f"a run has only {fewest} timed steps: the median and its interval are coarse")
    unequal = [side for side, group in (("A", a), ("B", b)) if group.unequal_steps]
    if unequal:  # what the figures are, said: the table's columns differ for these
        notes.append(
            f"{' and '.join(unequal)}: texts of unequal length: throughput is over the mean "
            "step, as in reports; step times are medians"
        )
    for side, group in (("A", a), ("B", b)):
        note = stalls_note([r.summary for r in group.runs])
        if note:
            notes.append(
                f"{side} {note}: its step time is the median, which the stalls do not move"
            )
    for side, group in (("A", a), ("B", b)):
        busy = busy_count(r.summary for r in group.runs)
        if busy:
            notes.append(
                f"{side}: {busy} of {len(group.runs)} run(s) ran on a busy machine (other work "
                f"used their cores): {NOT_TRUSTED}, the difference is not called significant"
            )
    notes += script_warnings(a, b)
    if len(a.runs) == 1 or len(b.runs) == 1:
        notes.append(
            "one run on a side: the interval covers step-to-step noise only, and consecutive "
            "steps are correlated, so it is optimistic; repeats (a sweep with repeats >= 2) "
            "make it honest"
        )
    return notes


def script_warnings(a: Group, b: Group) -> list[str]:
    """A side whose script runs waited for their data (the ratio then measures the data
    pipeline as much as the model), or whose ranks disagreed (a miscounted throughput)."""
    notes = []
    for side, group in (("A", a), ("B", b)):
        bound = [r.figures.data_wait_share or 0.0 for r in group.runs if is_input_bound(r.summary)]
        if bound:
            notes.append(
                f"{side}: {len(bound)} of {len(group.runs)} run(s) input-bound (data wait up "
                f"to {max(bound):.0%} of the step): the ratio measures the script's data "
                "pipeline as much as its model"
            )
        if any(disagreement_text(r.summary) for r in group.runs):
            notes.append(
                f"{side}: the ranks of a script run disagreed (different samples= or steps; "
                "`trainscale runs show` says how): its throughput may be miscounted"
            )
    return notes


@dataclass
class RunComparison:
    """B against A, one row per matched configuration."""

    a: Side
    b: Side
    rows: list[dict[str, Any]]
    """Per configuration: its label, the runs and workloads of each side, the warnings, and
    `metrics.compare.Comparison.to_dict()`."""
    unmatched: list[str]
    """Labels of configurations found on one side only (two multi-configuration sweeps)."""
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `trainscale compare --json` prints."""
        return {
            "a": _side_dict(self.a),
            "b": _side_dict(self.b),
            "comparisons": self.rows,
            "unmatched_labels": self.unmatched,
        }


def _side_dict(side: Side) -> dict[str, Any]:
    return {
        "kind": side.kind,
        "id": side.ident,
        "configuration": side.config,
        "skipped_runs": side.skipped,
    }


def compare(
    a: str,
    b: str,
    *,
    config: str | None = None,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    store: str | Path | None = None,
) -> RunComparison:
    """Compare the step times of run or sweep `b` against `a` (ids or unique prefixes, or
    `SWEEP:LABEL` for one configuration of a sweep: see `resolve_side`).

    `config` picks one configuration (by label) of a side that has several; two sweeps are
    otherwise matched label by label. The interval is a percentile bootstrap at `confidence`
    with `resamples` resamples drawn from `seed`.
    """
    if not 0.0 < confidence < 1.0:
        raise TrainscaleError(f"--confidence must be between 0 and 1, got {confidence}")
    check_count(
        "--resamples",
        resamples,
        MIN_RESAMPLES,
        MAX_RESAMPLES,
        "the interval is stable from a few thousand; more only costs time",
    )
    if not 0 <= seed <= MAX_SEED:
        raise TrainscaleError(f"--seed must be from 0 to {MAX_SEED:,}, got {seed}")
    store_path = store or default_store_path()
    with RunStore(store_path, create=False, fail_stale=True) as opened:
        side_a = resolve_side(opened, a)
        side_b = resolve_side(opened, b)
        pairs = pair_groups(side_a, side_b, config)
        refuse_self_comparison(pairs)
        for _, group_a, group_b in pairs:
            load_steps(opened, group_a)
            load_steps(opened, group_b)

    rows = []
    for label, group_a, group_b in pairs:
        result = compare_step_times(
            group_a.step_times,
            group_b.step_times,
            samples_per_step_a=group_a.global_batch_size or 1,
            samples_per_step_b=group_b.global_batch_size or 1,
            unequal_steps_a=group_a.unequal_steps,
            unequal_steps_b=group_b.unequal_steps,
            confidence=confidence,
            num_resamples=resamples,
            seed=seed,
        )
        figures = result.to_dict()
        is_trusted = trusted([r.summary for r in group_a.runs], [r.summary for r in group_b.runs])
        if not is_trusted:  # the busy rule: no verdict rests on a busy run
            figures["significant"] = False
        rows.append(
            {
                "label": label,
                "a_runs": [r.run_id for r in group_a.runs],
                "b_runs": [r.run_id for r in group_b.runs],
                "a_workload": group_a.workload,
                "b_workload": group_b.workload,
                "a_global_batch_size": group_a.global_batch_size,
                "b_global_batch_size": group_b.global_batch_size,
                "a_stalls": stalls_note([r.summary for r in group_a.runs]),
                "b_stalls": stalls_note([r.summary for r in group_b.runs]),
                "a_busy_runs": busy_count(r.summary for r in group_a.runs),
                "b_busy_runs": busy_count(r.summary for r in group_b.runs),
                "warnings": warnings_for(group_a, group_b),
                **figures,
                "trusted": is_trusted,
            }
        )
    return RunComparison(side_a, side_b, rows, unmatched(side_a, side_b, pairs), confidence)


def significance_word(row: dict[str, Any]) -> str:
    """A compared row's verdict in a word: not trusted (a busy run), '-' with why where a
    side timed too few steps to judge, else yes or no."""
    if not row["trusted"]:
        return "not trusted"
    if min(row["a"]["num_steps"], row["b"]["num_steps"]) < MIN_JUDGED_STEPS:
        return f"- (fewer than {MIN_JUDGED_STEPS} timed steps a side)"
    return "yes" if row["significant"] else "no"


def unmatched(a: Side, b: Side, pairs: list[tuple[str, Group, Group]]) -> list[str]:
    """Labels on one side only, when two multi-configuration sweeps were matched by label."""
    used = {id(g) for _, ga, gb in pairs for g in (ga, gb)}
    if len(a.groups) > 1 and len(b.groups) > 1:
        return [g.label for side in (a, b) for g in side.groups if id(g) not in used]
    return []


def how_they_differ(a: Group, b: Group) -> str:
    """What sets two single configurations apart, by the settings that differ, named as
    reports name configurations: 'A workers=1, threads_per_worker=2; B workers=2, ...';
    '' where their settings are the same (or unknown)."""
    configs = {"a": a.runs[0].config, "b": b.runs[0].config}
    if not all(configs.values()) or not differing_keys(configs.values(), LABEL_SKIP):
        return ""
    labels = labels_from_differences(configs)
    return f"A {labels['a']}; B {labels['b']}"
