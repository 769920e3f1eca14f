"""The report's tables as rows of display text, shared by the Markdown and the HTML page.

Both formats show the same figures because both take their cells from here; only the markup
differs.
"""

from __future__ import annotations

import math
import re
from typing import Any

from trainscale.reporting.compare import parallel_setting
from trainscale.reporting.model import Configuration, ReportData, WorkloadSection

CONFIGURATION_COLUMNS = (
    "configuration",
    "data",
    "workers x threads (cores)",
    "runs",
    "samples/s (median)",
    "samples/s IQR",
    "step ms (median, IQR)",
    "speedup",
    "paired speedup [95%]",
    "efficiency / worker",
    "efficiency / core",
    "time to target (s)",
    "test accuracy",
    "peak MiB / worker",
    "TFLOP/s (MFU)",
    "energy kJ (CPU pkg / GPU)",
    "cost ($)",
    "cost to target ($)",
    "notes",
)
CORE_COLUMNS = (
    "configuration",
    "workers x threads (cores)",
    "samples/s (median)",
    "speedup",
    "efficiency / core",
    "test accuracy",
    "time to target (s)",
)
"""The main table: what a configuration is and what it achieved, narrow enough to read
whole on a laptop (about 100 columns of Markdown with labels of up to 35 characters)."""
DETAIL_COLUMNS = ("configuration",) + tuple(
    c for c in CONFIGURATION_COLUMNS if c not in CORE_COLUMNS
)
"""Everything else, one row per configuration as in the main table: spread, step time,
memory, FLOP/s, energy, cost, notes."""
HEADINGS = {
    "workers x threads (cores)": "w x t (cores)",
    "samples/s (median)": "samples/s",
    "efficiency / core": "eff./core",
    "test accuracy": "accuracy",
    "time to target (s)": "to target (s)",
}
"""Shorter headings of the main table's columns (the explanations name both)."""


def heading(column: str, core: bool) -> str:
    """The heading a column is shown under: shortened in the main table."""
    return HEADINGS.get(column, column) if core else column


AFFINITY_COLUMNS = (
    "setting",
    "how it ran",
    "processing time per step (ms)",
    "% gain vs slowest",
)
NOT_COMPLETED_COLUMNS = ("run", "workload", "configuration", "status", "reason")

EXPLANATIONS = (
    (
        "main table",
        "configuration, w x t (cores) = workers x threads per worker (cores given), "
        "samples/s (median), speedup, eff./core = efficiency / core, accuracy = test "
        "accuracy, to target (s) = time to target; the details table under it holds the rest",
    ),
    (
        "samples/s",
        "global training samples per second of training clock (warm-up excluded), "
        "median over the configuration's completed runs (repeats)",
    ),
    ("samples/s IQR", "inter-quartile range of the repeats' samples/s (blank with one run)"),
    (
        "step ms",
        "median over repeats of each run's median step time (the slowest worker's), "
        "with the typical within-run step-time IQR as a share of the median",
    ),
    ("speedup", "median samples/s over the baseline configuration's median samples/s"),
    (
        "paired speedup",
        "samples/s over the baseline's in the same round (repeat), median over rounds with "
        "its 95% bootstrap interval; the notes say faster or slower only where the interval "
        "excludes 1 (docs/methodology.md)",
    ),
    ("efficiency / worker", "speedup / (workers / the baseline's workers)"),
    (
        "efficiency / core",
        "speedup / (cores / the baseline's cores); cores = workers x "
        "threads, at most the cores the workers could run on",
    ),
    (
        "time to target",
        "training clock until the test accuracy first reached the workload's "
        "target; median of the runs that reached it; real data only",
    ),
    ("test accuracy", "final test accuracy, median over repeats; real data only"),
    (
        "time per epoch",
        "the training clock (median over repeats; warm-up steps and any pre-training "
        "included, evaluation not) over the epochs the run trained; '-' for runs given a "
        "number of steps",
    ),
    ("peak MiB / worker", "peak resident memory of the largest worker, median over repeats"),
    (
        "TFLOP/s (MFU)",
        "model training FLOPs per sample x samples/s, and its share of the theoretical "
        "dense peak of the devices used at the run's precision (blank when the device is "
        "not in the peak table); see docs/hardware.md",
    ),
    (
        "energy kJ",
        "CPU package energy (RAPL) and GPU energy (NVML) over the training call, summed over "
        "nodes; '-' where the machine does not expose the counter",
    ),
    (
        "cost",
        "devices (GPUs, or cores) x training clock x the price table's $ per device-hour; "
        "cost to target uses the time to target instead of the training clock",
    ),
    (
        "noisy",
        "a throughput IQR across repeats, or a typical step-time IQR within a run, "
        "above 10% of the median",
    ),
)
"""(term, meaning) lines printed under the tables."""


CODE_SPAN = re.compile(r"`([^`]+)`")
"""A command or name in a note, written between backticks (`trainscale recommend`)."""

ROW_MARKS = (
    "a red bar at a row's left marks a noisy configuration (see 'noisy'); a green row is "
    "the baseline"
)
"""What the HTML page's row marks mean."""


def plain_text(text: str) -> str:
    """A note for plain text (CSV, plots): its backticks dropped, the words kept."""
    return CODE_SPAN.sub(r"\1", text)


def configuration_rows(section: WorkloadSection) -> list[dict[str, str]]:
    """One row of display text per configuration of a workload."""
    return [_configuration_row(c) for c in section.configurations]


def _configuration_row(c: Configuration) -> dict[str, str]:
    threads = c.threads_setting
    if threads == "torch-default":
        threads = f"{c.threads_per_worker} (torch default)"
    row = {
        "configuration": c.label + (" (baseline)" if c.is_baseline else ""),
        "data": c.data_kind or "-",
        "workers x threads (cores)": f"{c.workers} x {threads} ({c.cores})",
        "runs": str(c.repeats) + (f" (+{c.num_failed} failed)" if c.num_failed else ""),
        "samples/s (median)": number(c.samples_per_s_median, ".1f"),
        "samples/s IQR": _spread(c.samples_per_s_iqr, c.samples_per_s_rel_iqr),
        "step ms (median, IQR)": _step(c),
        "speedup": number(c.speedup, ".2f", suffix="x"),
        "paired speedup [95%]": _paired(c),
        "efficiency / worker": percent(c.efficiency_per_worker),
        "efficiency / core": percent(c.efficiency_per_core),
        "time to target (s)": time_to_target(c),
        "test accuracy": "-" if c.synthetic else number(c.test_accuracy, ".4f"),
        "peak MiB / worker": number(
            None if c.peak_memory_bytes is None else c.peak_memory_bytes / 2**20, ".0f"
        ),
        "TFLOP/s (MFU)": _flops(c),
        "energy kJ (CPU pkg / GPU)": _energy(c),
        "cost ($)": money(c.cost_usd),
        "cost to target ($)": "-" if c.synthetic else money(c.cost_to_target_usd),
        "notes": "; ".join(c.notes),
    }
    return row


def _paired(c: Configuration) -> str:
    """'1.62x [1.41, 1.80]', or '1.62x' from one round, or '-' when not paired."""
    text = number(c.paired_speedup, ".2f", suffix="x")
    if c.paired_speedup_ci is not None:
        text += f" [{c.paired_speedup_ci[0]:.2f}, {c.paired_speedup_ci[1]:.2f}]"
    return text


def _flops(c: Configuration) -> str:
    if c.achieved_tflops is None:
        return "-"
    text = f"{c.achieved_tflops:.3g}"
    return text + (f" ({c.mfu:.1%})" if c.mfu is not None else "")


def _energy(c: Configuration) -> str:
    if c.cpu_package_j is None and c.gpu_j is None:
        return "-"
    kj = (number(None if v is None else v / 1e3, ".3g") for v in (c.cpu_package_j, c.gpu_j))
    return " / ".join(kj)


def affinity_rows(section: WorkloadSection) -> list[dict[str, str]]:
    """The classic table of a workload: setting | processing time per step | % gain."""
    return [
        {
            "setting": row.label,
            "how it ran": row.setting,
            "processing time per step (ms)": f"{row.step_time_ms:.1f}",
            "% gain vs slowest": f"{row.gain_vs_slowest_pct:.1f}%",
        }
        for row in section.affinity_rows
    ]


def not_completed_rows(data: ReportData) -> list[dict[str, str]]:
    """Runs that failed or never finished, with their reasons."""
    return [
        {
            "run": run.run_id[:8],
            "workload": run.workload or "-",
            "configuration": run.label,
            "status": run.status + (" (a later attempt completed)" if run.retried else ""),
            "reason": run.reason,
        }
        for run in data.not_completed
    ]


def baseline_text(section: WorkloadSection) -> str:
    """The baseline named exactly: label, how it ran, its runs and the rule that chose it."""
    base = section.baseline
    if base is None:
        return f"no baseline ({section.baseline_rule})"
    runs = ", ".join(r[:8] for r in base.run_ids)
    return (
        f"'{base.label}' ({parallel_setting(base)}; {number(base.samples_per_s_median, '.1f')} "
        f"samples/s; runs {runs}), {section.baseline_rule}"
    )


def machine_lines(data: ReportData) -> list[str]:
    """One line per machine the reported runs ran on."""
    lines = []
    for machine in data.machines:
        lines.append(
            f"CPU {machine.get('cpu_model') or 'unknown'}, "
            f"{machine.get('logical_cores') or '?'} logical cores, "
            f"torch {machine.get('torch_version') or 'unknown'}, "
            + "".join(f"{framework}, " for framework in machine.get("frameworks") or [])
            + f"host {machine.get('hostname') or 'unknown'}"
        )
    return lines


def number(value: Any, spec: str, suffix: str = "") -> str:
    """A number in `spec`, or '-' for none."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return format(value, spec) + suffix


def money(value: float | None) -> str:
    """Dollars in fixed point, never in scientific notation: cents from $1 up ('12.50'),
    three significant digits below, trailing zeros dropped ('0.1', '0.0123', '0.000457');
    '-' for none."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 1:
        return f"{value:.2f}"
    decimals = 2 - math.floor(math.log10(abs(value)))
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def time_to_target(c: Configuration) -> str:
    """Median time to target, how many runs reached it, or why there is none."""
    if c.synthetic or not c.num_evaluated:
        return "-"
    if c.target_accuracy is None:  # a script run given no --target-accuracy
        return "no target"
    if c.emulated:  # one process's clock is no time of N workers: steps, not seconds
        return "not reached" if c.steps_to_target is None else f"{c.steps_to_target:g} steps"
    if c.time_to_target_s is None:
        return "not reached"
    reached = f" ({c.num_reached}/{c.num_evaluated})" if c.num_reached < c.num_evaluated else ""
    return f"{c.time_to_target_s:.1f}{reached}"


def _spread(iqr: float | None, relative: float | None) -> str:
    if iqr is None:
        return "-"
    return f"{iqr:.1f}" + (f" ({relative:.0%})" if relative is not None else "")


def _step(c: Configuration) -> str:
    if c.step_time_s_median is None:
        return "-"
    text = f"{c.step_time_s_median * 1000:.1f}"
    if c.step_time_rel_iqr is not None:
        text += f" ({c.step_time_rel_iqr:.0%})"
    return text
