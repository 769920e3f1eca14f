"""A sweep's configurations at a glance: runs done, throughput (the median over the runs of
each run's samples/s, as reports and `trainscale compare` take it), spread, accuracy, the
speedup over the workload's baseline paired repeat by repeat (as the report has it), and a
note where runs stalled. Busy runs follow the busy rule (`metrics.run_flags`): the label says
how many ran busy, their rounds are left out of the paired speedup while quiet rounds
remain, and where none does the verdict is 'not trusted: busy machine'."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainscale.metrics import stats
from trainscale.metrics.run_flags import ran_busy, stalls_note
from trainscale.metrics.throughput import repeats_throughput
from trainscale.reporting import ReportError
from trainscale.reporting.aggregate import aggregate
from trainscale.reporting.tables import number
from trainscale.results.store import RunStore

SUMMARY_HEADERS = (
    "configuration",
    "runs",
    "samples/s (median)",
    "min..max",
    "test acc",
    "paired speedup [95%]",
    "paired verdict",
    "note",
)


@dataclass
class SweepSummary:
    """One row per configuration of the sweep, in plan order (`SUMMARY_HEADERS`)."""

    title: str
    rows: list[list[str]]


def sweep_summary(store: str | Path, sweep_id: str) -> SweepSummary:
    """The summary of sweep `sweep_id` (or a unique prefix) from its completed runs; test
    accuracy only from real data."""
    with RunStore(store, create=False) as opened:
        sweep = opened.get_sweep(sweep_id)
        runs = opened.sweep_runs(sweep.sweep_id)
    # One completed run a planned run (configuration and repeat), the newest, as `runs
    # sweeps` and a resume count them: a repeat made twice (a deleted run imported again
    # beside the one a resume made) is one repeat.
    latest: dict[tuple[str, Any], Any] = {}
    for record in runs:  # earlier attempts first
        if record.status == "completed":
            repeat = record.repeat_index if record.repeat_index is not None else record.run_id
            latest[(record.config_hash or "", repeat)] = record
    groups: dict[str, list[Any]] = {}
    for (config_hash, _), record in latest.items():
        groups.setdefault(config_hash, []).append(record)
    paired = _paired_cells(runs, sweep.short_id)
    rows = []
    for config_hash, label in dict.fromkeys((p["config_hash"], p["label"]) for p in sweep.plan):
        done = groups.get(config_hash, [])
        rates = [r for run in done if (r := run.figures.samples_per_s) is not None]
        real = [run for run in done if run.data_kind == "real"]
        accuracies = [a for run in real if (a := run.figures.test_accuracy) is not None]
        busy = sum(ran_busy(r.summary) for r in done)
        rows.append(
            [
                # Runs that shared their cores with other work: their speed is not trusted.
                f"{label} (busy: {busy} of {len(done)})" if busy else label,
                str(len(done)),
                f"{repeats_throughput(rates):.1f}" if rates else "-",
                f"{min(rates):.1f}..{max(rates):.1f}" if rates else "-",
                f"{stats.median(accuracies):.4f}" if accuracies else "-",
                *paired.get(config_hash, ("-", "-")),
                stalls_note([r.summary for r in done]) or "",
            ]
        )
    return SweepSummary(f"sweep {sweep.short_id}: {sweep.name}", rows)


def _paired_cells(runs: list[Any], short_id: str) -> dict[str, tuple[str, str]]:
    """Per config hash, (paired speedup with its interval, verdict) against the workload's
    baseline, from the report's figures (the same baseline rule, the same arithmetic)."""
    try:
        data = aggregate(runs, title=short_id, source=f"sweep {short_id}")
    except ReportError:  # no run completed: nothing to pair
        return {}
    cells = {}
    for config in data.configurations:
        if config.is_baseline:
            cells[config.key] = ("1.00x", "baseline")
            continue
        text = number(config.paired_speedup, ".2f", suffix="x")
        if config.paired_speedup_ci is not None:
            low, high = config.paired_speedup_ci
            text += f" [{low:.2f}, {high:.2f}] ({config.paired_rounds} rounds)"
        if config.paired_busy_rounds and config.paired_trusted:
            text += f" ({config.paired_busy_rounds} busy round(s) left out)"
        cells[config.key] = (text, config.paired_verdict or "-")
    return cells
