"""A sweep as plain data: what `trainscale sweep --json` prints and `trainscale.sweep()`'s
`to_dict()` returns, built once here so that both say the same.

Runs are read back from the store (as every result is), every attempt's; the
configurations are report.csv's rows of the sweep's completed runs. A dry run stores
nothing: its object has the plan alone (`sweep_id` None).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainscale.reporting import ReportError
from trainscale.reporting.build import load_report_data
from trainscale.reporting.csv_table import csv_rows
from trainscale.results.export import finite_or_none, run_to_json_dict
from trainscale.results.records import RunRecord
from trainscale.results.store import RunStore
from trainscale.sweeps.run import SweepResult


def sweep_runs(store: Path, sweep_id: str) -> list[RunRecord]:
    """Every run of the sweep (earlier attempts' too), in the order they were made."""
    with RunStore(store, create=False) as opened:
        return list(reversed(opened.list_runs(sweep_id=sweep_id)))


def sweep_configurations(store: Path, sweep_id: str) -> list[dict[str, Any]]:
    """report.csv's rows of the sweep, one per configuration with a completed run; [] when
    none completed."""
    try:
        return list(csv_rows(load_report_data(store, sweep_id=sweep_id)))
    except ReportError:  # nothing the report can read: no configuration to show
        return []


def sweep_document(result: SweepResult, runs: list[RunRecord] | None = None) -> dict[str, Any]:
    """The sweep as one JSON-ready object: its id, name and source, the plan, what this
    call completed and what failed (with why), the runs an earlier attempt had completed,
    the report written, the configurations and every run's `--json` object; strict JSON (a
    figure that is not finite is None). `runs`: `sweep_runs`, if already read."""
    outcome = result.outcome
    document: dict[str, Any] = {
        "sweep_id": None if outcome is None else outcome.sweep_id,
        "name": result.spec.name,
        "source": result.source,
        "store": str(result.store),
        "resumed": False if outcome is None else outcome.resumed,
        "planned": [planned.to_dict() for planned in result.plan.runs],
        "merged": [{"label": label, "same_as": same} for label, same in result.plan.merged],
        # skip_invalid: the configurations left out, and why (the rest of the plan runs).
        "skipped": [{"label": label, "reason": why} for label, why in result.plan.skipped],
        "completed": [],
        "failed": [],
        "skipped_done": 0,
        "report": str(result.report) if result.report else None,
        "configurations": [],
        "runs": [],
    }
    if outcome is None:  # a dry run: nothing stored
        preview = result.resume_preview
        if preview is not None:  # --resume: the sweep it would continue
            document.update(
                sweep_id=preview.sweep_id,
                resumed=True,
                skipped_done=sum(map(result.done_before, result.plan.runs)),
            )
        return finite_or_none(document)
    records = sweep_runs(result.store, outcome.sweep_id) if runs is None else runs
    document.update(
        completed=list(outcome.completed),
        failed=[list(failure) for failure in outcome.failed],
        skipped_done=outcome.skipped_done,
        configurations=sweep_configurations(result.store, outcome.sweep_id),
        runs=[run_to_json_dict(record) for record in records],
    )
    return finite_or_none(document)
