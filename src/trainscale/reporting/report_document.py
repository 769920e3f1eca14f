"""A written report as plain data: what `trainscale report --json` prints and
`trainscale.report()`'s `to_dict()` returns, built once here so that both say the same.

The configurations are report.csv's rows; beside them, per workload, what the rows alone do
not say: which configuration is the baseline and by what rule, and the Amdahl fit.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from trainscale.metrics.scaling import AmdahlFit
from trainscale.reporting.build import WrittenReport
from trainscale.reporting.csv_table import csv_rows
from trainscale.reporting.model import WorkloadSection
from trainscale.results.export import finite_or_none


def not_drawn_lines(written: WrittenReport) -> list[str]:
    """Each plot left out, as 'KIND (WORKLOAD): why'."""
    return [f"{s.kind} ({s.workload}): {s.reason}" for s in written.skipped]


def report_document(written: WrittenReport, out: Path) -> dict[str, Any]:
    """The report as one JSON-ready object: the files written into `out`, the configurations
    (report.csv's rows), each workload's baseline and Amdahl fit, the runs that did not
    complete with why, the machines and notes; strict JSON (a figure that is not finite is
    None)."""
    data = written.data
    configurations = data.configurations
    return finite_or_none(
        {
            "source": data.source,
            "sweep_id": data.sweep_id,
            "out": str(out),
            "html": str(written.html),
            "markdown": str(written.markdown),
            "csv": str(written.csv),
            "plots": [str(p) for p in written.plots],
            "not_drawn": not_drawn_lines(written),
            "runs_completed": sum(c.repeats for c in configurations),
            "busy_runs": sum(c.busy_runs for c in configurations),
            "workloads": [_workload(section) for section in data.workloads],
            "configurations": csv_rows(data),
            "not_completed": [asdict(run) for run in data.not_completed],
            "machines": data.machines,
            "notes": data.notes,
        }
    )


def _workload(section: WorkloadSection) -> dict[str, Any]:
    return {
        "workload": section.workload,
        "baseline": None if section.baseline is None else section.baseline.label,
        "baseline_rule": section.baseline_rule,
        "amdahl": _amdahl(section.amdahl),
        "amdahl_note": section.amdahl_note,
        "affinity_note": section.affinity_note,
    }


def _amdahl(fit: AmdahlFit | None) -> dict[str, Any] | None:
    if fit is None:
        return None
    return {**asdict(fit), "clamped": fit.clamped, "max_speedup": fit.max_speedup}
