"""`trainscale compare A B`: is B faster than A, by how much, and is the difference real?"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.config.limits import DEFAULT_RESAMPLES, MAX_RESAMPLES, MIN_RESAMPLES, check_count
from trainscale.errors import StoreError, TrainscaleError
from trainscale.results.store import DamagedRecordError, RunRecord, RunStore

EPILOG = """\
examples:
  trainscale compare 3f2a9c1e 7b01d4e2            # two runs (ids or unique prefixes)
  trainscale compare SWEEP_A SWEEP_B              # two sweeps, configuration by configuration
  trainscale compare SWEEP_A 7b01d4e2 --config "workers=2"
  trainscale compare 3f2a9c1e 7b01d4e2 --json

Each side is a run, or the completed runs of a sweep (its repeats). The ratio is B over A;
the interval is a percentile bootstrap (runs, then steps, when a side has repeats) and the
difference is significant when the throughput interval excludes 1.0. See
docs/compare-and-recommend.md.
"""


FEW_STEPS = 20
"""Below this many timed steps in a run, the comparison says its figures are coarse."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="ratio of throughput and step time of two runs or sweeps, with a 95%% interval",
        description=(
            "Compare the timed step times of B against A: the ratio of median step times, "
            "the throughput ratio with a bootstrap confidence interval, a Mann-Whitney rank "
            "test, and whether the difference is significant. Unlike runs (other workload or "
            "global batch) may be compared, but the table says so."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("a", metavar="RUN_OR_SWEEP_A", help="run or sweep id (or unique prefix)")
    parser.add_argument("b", metavar="RUN_OR_SWEEP_B", help="run or sweep id (or unique prefix)")
    parser.add_argument(
        "--config",
        metavar="LABEL",
        help="compare only this configuration of a multi-configuration sweep",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        metavar="C",
        help="confidence level of the interval, between 0 and 1 (default: 0.95)",
    )
    parser.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        metavar="N",
        help=f"bootstrap resamples, {MIN_RESAMPLES} to {MAX_RESAMPLES:,} (default: "
        f"{DEFAULT_RESAMPLES})",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    add_store_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(handler=run)


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

    @property
    def name(self) -> str:
        return f"{self.kind} {self.ident[:8]}"


def resolve_side(store: RunStore, ident: str) -> Side:
    """A run or a sweep by id or unique prefix; StoreError (one line) when neither or both."""
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
    for error in (run_error, sweep_error):
        if isinstance(error, DamagedRecordError):
            raise error
    for error in (run_error, sweep_error):
        if error is not None and "matches" in str(error):
            raise error
    raise StoreError(
        f"no run or sweep {ident.strip()!r} in {store.path}; `trainscale runs list` shows the "
        "stored runs"
    )


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


def _sweep_side(store: RunStore, sweep) -> Side:
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
        return [(config, group_a, group_b)]
    if len(a.groups) == 1 and len(b.groups) == 1:
        label = a.groups[0].label if a.groups[0].label == b.groups[0].label else ""
        return [(label, a.groups[0], b.groups[0])]
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
    from trainscale.metrics.compare import timed_steps

    group.step_times = []
    for record in group.runs:
        warmup = record.summary.get("warmup_steps_excluded", 0) or 0
        steps = [t for t in timed_steps(store.step_times(record.run_id), warmup) if t > 0]
        if not steps:
            raise TrainscaleError(f"run {record.short_id} has no timed steps to compare")
        group.step_times.append(steps)


def warnings_for(a: Group, b: Group) -> list[str]:
    """Why a comparison may not be like with like."""
    notes = []
    if a.workload != b.workload:
        notes.append(f"different workloads ({a.workload} vs {b.workload})")
    if a.global_batch_size != b.global_batch_size:
        notes.append(
            f"different global batch ({a.global_batch_size} vs {b.global_batch_size}): "
            "throughput ratio is in samples/s, step-time ratio is per step of unequal work"
        )
    machines = {
        (r.env.get("hostname"), r.env.get("cpu_model")) for group in (a, b) for r in group.runs
    }
    if len(machines) > 1:
        notes.append("runs come from different machines")
    fewest = min(len(steps) for group in (a, b) for steps in group.step_times)
    if fewest < FEW_STEPS:
        notes.append(f"a run has only {fewest} timed steps: the median and its interval are coarse")
    if len(a.runs) == 1 or len(b.runs) == 1:
        notes.append(
            "one run on a side: the interval covers step-to-step noise only, and consecutive "
            "steps are correlated, so it is optimistic; repeats (a sweep with repeats >= 2) "
            "make it honest"
        )
    return notes


def run(args: argparse.Namespace) -> int:
    from trainscale.metrics.compare import compare_step_times
    from trainscale.results.store import default_store_path

    if not 0.0 < args.confidence < 1.0:
        raise TrainscaleError(f"--confidence must be between 0 and 1, got {args.confidence}")
    check_count(
        "--resamples",
        args.resamples,
        MIN_RESAMPLES,
        MAX_RESAMPLES,
        "the interval is stable from a few thousand; more only costs time",
    )
    store_path = args.store or default_store_path()
    with RunStore(store_path, create=False, fail_stale=True) as store:
        side_a = resolve_side(store, args.a)
        side_b = resolve_side(store, args.b)
        pairs = pair_groups(side_a, side_b, args.config)
        for _, group_a, group_b in pairs:
            load_steps(store, group_a)
            load_steps(store, group_b)

    rows = []
    for label, group_a, group_b in pairs:
        result = compare_step_times(
            group_a.step_times,
            group_b.step_times,
            samples_per_step_a=group_a.global_batch_size or 1,
            samples_per_step_b=group_b.global_batch_size or 1,
            confidence=args.confidence,
            num_resamples=args.resamples,
            seed=args.seed,
        )
        rows.append(
            {
                "label": label,
                "a_runs": [r.run_id for r in group_a.runs],
                "b_runs": [r.run_id for r in group_b.runs],
                "a_workload": group_a.workload,
                "b_workload": group_b.workload,
                "a_global_batch_size": group_a.global_batch_size,
                "b_global_batch_size": group_b.global_batch_size,
                "warnings": warnings_for(group_a, group_b),
                **result.to_dict(),
            }
        )
    unmatched = _unmatched(side_a, side_b, pairs)
    if args.json:
        print(
            json.dumps(
                {
                    "a": {"kind": side_a.kind, "id": side_a.ident, "skipped_runs": side_a.skipped},
                    "b": {"kind": side_b.kind, "id": side_b.ident, "skipped_runs": side_b.skipped},
                    "comparisons": rows,
                    "unmatched_labels": unmatched,
                }
            )
        )
        return 0
    _print_table(side_a, side_b, rows, unmatched, args.confidence)
    return 0


def _unmatched(a: Side, b: Side, pairs: list[tuple[str, Group, Group]]) -> list[str]:
    used = {id(g) for _, ga, gb in pairs for g in (ga, gb)}
    if len(a.groups) > 1 and len(b.groups) > 1:
        return [g.label for side in (a, b) for g in side.groups if id(g) not in used]
    return []


def _print_table(
    a: Side, b: Side, rows: list[dict[str, Any]], unmatched: list[str], confidence: float
) -> None:
    from rich.console import Console
    from rich.table import Table

    # markup off: sweep labels may hold [brackets]. Piped output gets a wide, plain table.
    if sys.stdout.isatty():
        console = Console(markup=False, highlight=False)
    else:
        console = Console(
            file=sys.stdout, width=200, color_system=None, markup=False, highlight=False
        )
    table = Table(title=f"B = {b.name} against A = {a.name}")
    level = f"{confidence:.0%}"
    headers = (
        "configuration",
        "A median step ms",
        "B median step ms",
        "step time B/A",
        f"throughput B/A [{level} CI]",
        "significant",
        "rank-biserial",
    )
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        low, high = row["throughput_ratio_ci"]
        slow, shigh = row["step_time_ratio_ci"]
        table.add_row(
            row["label"] or "-",
            _side_cell(row["a"]),
            _side_cell(row["b"]),
            f"{row['step_time_ratio']:.3f} [{slow:.3f}, {shigh:.3f}]",
            f"{row['throughput_ratio']:.3f} [{low:.3f}, {high:.3f}]",
            "yes" if row["significant"] else "no",
            f"{row['rank_biserial']:+.2f} (p={row['mann_whitney_p']:.2g})",
        )
    console.print(table)
    method = "hierarchical (runs, then steps)" if any(r["hierarchical"] for r in rows) else "steps"
    console.print(
        f"Ratios are B/A; throughput > 1 means B is faster. Bootstrap over {method}, "
        f"{rows[0]['num_resamples']} resamples, seed {rows[0]['seed']}."
    )
    for row in rows:
        for note in row["warnings"]:
            prefix = f"{row['label']}: " if row["label"] else ""
            console.print(f"warning: {prefix}{note}")
    for side in (a, b):
        if side.skipped:
            console.print(f"{side.name}: {side.skipped} run(s) not completed, left out")
    if unmatched:
        console.print("configurations on one side only: " + ", ".join(map(repr, unmatched)))


def _side_cell(side: dict[str, Any]) -> str:
    runs = "1 run" if side["num_runs"] == 1 else f"{side['num_runs']} runs"
    return f"{side['median_step_s'] * 1000:.2f} ({runs}, {side['num_steps']} steps)"
