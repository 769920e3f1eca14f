"""A bench as plain data: what `trainscale bench --json` prints and `trainscale.bench()`'s
`to_dict()` returns, built once here so that both say the same.

Runs are read back from the store (as every result is), in the order they ran; the
configurations are report.csv's rows of the runs that completed, each named by the bench's
setting, speedups against the serial 1-core baseline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainscale.benchmark.run import BenchResult
from trainscale.benchmark.table import baseline_of
from trainscale.reporting import ReportError
from trainscale.reporting.build import load_report_data
from trainscale.reporting.csv_table import csv_rows
from trainscale.results.export import finite_or_none, run_to_json_dict
from trainscale.results.records import RunRecord
from trainscale.results.store import RunStore


def bench_runs(result: BenchResult, store: Path) -> list[RunRecord]:
    """Every run of the bench (failed ones too), in the order they ran."""
    with RunStore(store, create=False) as opened:
        return list(reversed(opened.list_runs(tag=f"bench:{result.bench_id}")))


def bench_configurations(result: BenchResult, store: Path) -> list[dict[str, Any]]:
    """One row per setting with a completed run: `setting`, then report.csv's columns with
    speedups against the serial 1-core setting; [] when the baseline did not complete."""
    setting_of = {
        run["run_id"]: item.rung.name for item in result.results for run in item.completed
    }
    base = baseline_of(result.results)
    if not setting_of or base is None:
        return []
    try:
        rows = csv_rows(
            load_report_data(store, run_ids=list(setting_of), baseline=base.completed[0]["run_id"])
        )
    except ReportError:  # nothing the report can read: no configuration to show
        return []
    return [{"setting": setting_of.get(str(row["run_ids"]).split()[0]), **row} for row in rows]


def bench_document(
    result: BenchResult, store: Path, runs: list[RunRecord] | None = None
) -> dict[str, Any]:
    """The bench as one JSON-ready object: what it measured and how, the table's rows, the
    lines printed under it (baselines, the GPU verdicts, the pitfalls, busy rounds), the
    configurations and every run's `--json` object, strict JSON (a figure that is not
    finite is None). `runs`: `bench_runs`, if already read."""
    records = bench_runs(result, store) if runs is None else runs
    return finite_or_none(
        {
            "bench_id": result.bench_id,
            "workload": result.workload,
            "data": result.options.data.kind,
            "data_note": result.data_note,
            "steps": result.steps,
            "rounds": result.rounds,
            "global_batch_size": result.global_batch_size,
            "out": str(result.out) if result.out else None,
            "table": result.rows,
            "baselines": result.baseline_lines,
            "gpu_verdicts": result.gpu_lines,
            "pitfalls": result.pitfall_lines,
            "extra_rounds": result.extra_rounds,
            "busy": result.busy_lines,
            "configurations": bench_configurations(result, store),
            "runs": [run_to_json_dict(record) for record in records],
        }
    )
