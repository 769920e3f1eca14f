"""The per-configuration table as CSV: raw numbers in plain units, for spreadsheets and scripts."""

from __future__ import annotations

import io
from typing import Any

from trainscale.reporting.model import Configuration, ReportData
from trainscale.reporting.tables import plain_text
from trainscale.results.csv_cells import write_csv

CSV_COLUMNS = (
    "workload",
    "framework",
    "configuration",
    "config_hash",
    "baseline",
    "data",
    "workers",
    "threads_per_worker",
    "cores",
    "affinity",
    "oversubscribed",
    "precision",
    "global_batch_size",
    "runs",
    "failed_runs",
    "samples_per_s_median",
    "samples_per_s_iqr",
    "step_time_ms_median",
    "step_time_rel_iqr",
    "speedup",
    "paired_speedup",
    "paired_speedup_low",
    "paired_speedup_high",
    "paired_rounds",
    "paired_verdict",
    "paired_busy_rounds",
    "busy_runs",
    "efficiency_per_worker",
    "efficiency_per_core",
    "time_to_target_s",
    "steps_to_target",
    "samples_to_target",
    "runs_reaching_target",
    "runs_evaluated",
    "test_accuracy",
    "peak_memory_bytes",
    "train_time_s",
    "achieved_tflops",
    "mfu",
    "mfu_vs_probe",
    "cpu_package_j",
    "gpu_j",
    "devices",
    "price_per_device_hour",
    "cost_usd",
    "cost_to_target_usd",
    "data_wait_share",
    "noisy",
    "notes",
    "run_ids",
)
"""Header of report.csv: one row per configuration; empty cells are unknown or not applicable."""


def csv_rows(data: ReportData) -> list[dict[str, Any]]:
    """One dict over `CSV_COLUMNS` per configuration, None for unknown."""
    return [_row(c) for c in data.configurations]


def render_csv(data: ReportData) -> str:
    """The table as CSV text (header first); text that a spreadsheet would read as a formula
    is quote-prefixed (`write_csv`)."""
    out = io.StringIO()
    write_csv(out, CSV_COLUMNS, csv_rows(data))
    return out.getvalue()


def _row(c: Configuration) -> dict[str, Any]:
    return {
        "workload": c.workload,
        "framework": c.framework,
        "configuration": c.label,
        "config_hash": c.key,
        "baseline": c.is_baseline,
        "data": c.data_kind,
        "workers": c.workers,
        "threads_per_worker": c.threads_per_worker,
        "cores": c.cores,
        "affinity": c.affinity,
        "oversubscribed": c.oversubscribed,
        "precision": c.precision,
        "global_batch_size": c.global_batch_size,
        "runs": c.repeats,
        "failed_runs": c.num_failed,
        "samples_per_s_median": c.samples_per_s_median,
        "samples_per_s_iqr": c.samples_per_s_iqr,
        "step_time_ms_median": None
        if c.step_time_s_median is None
        else c.step_time_s_median * 1000,
        "step_time_rel_iqr": c.step_time_rel_iqr,
        "speedup": c.speedup,
        "paired_speedup": c.paired_speedup,
        "paired_speedup_low": c.paired_speedup_ci[0] if c.paired_speedup_ci else None,
        "paired_speedup_high": c.paired_speedup_ci[1] if c.paired_speedup_ci else None,
        "paired_rounds": c.paired_rounds,
        "paired_verdict": c.paired_verdict,
        "paired_busy_rounds": c.paired_busy_rounds,
        "busy_runs": c.busy_runs,
        "efficiency_per_worker": c.efficiency_per_worker,
        "efficiency_per_core": c.efficiency_per_core,
        # Never a figure from synthetic data, even an empty one that looks like a result.
        "time_to_target_s": None if c.synthetic else c.time_to_target_s,
        "steps_to_target": c.steps_to_target,
        "samples_to_target": c.samples_to_target,
        "runs_reaching_target": None if c.synthetic else c.num_reached,
        "runs_evaluated": None if c.synthetic else c.num_evaluated,
        "test_accuracy": None if c.synthetic else c.test_accuracy,
        "peak_memory_bytes": c.peak_memory_bytes,
        "train_time_s": c.train_time_s,
        "achieved_tflops": c.achieved_tflops,
        "mfu": c.mfu,
        "mfu_vs_probe": c.mfu_vs_probe,
        "cpu_package_j": c.cpu_package_j,
        "gpu_j": c.gpu_j,
        "devices": c.devices,
        "price_per_device_hour": c.price_per_device_hour,
        "cost_usd": c.cost_usd,
        "cost_to_target_usd": None if c.synthetic else c.cost_to_target_usd,
        "data_wait_share": c.data_wait_share,  # a script's; empty for a built-in workload
        "noisy": c.noisy,
        "notes": "; ".join(plain_text(note) for note in c.notes),
        "run_ids": " ".join(c.run_ids),
    }
