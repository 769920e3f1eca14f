"""Marks a stored run earns from its own measurements: stalls and a busy machine. Pure.

A run is judged from its stored summary, so old and new runs, reports, tables, compare and
recommend all mark it the same way:

- **stalls**: the mean timed step is more than `STALL_RATIO` times the median timed step.
  The headline figures use the median (docs/methodology.md), which a few long stalls do not
  move; the mean, which they do, is shown beside it wherever a run is flagged.
- **busy**: the contention sampler judged that other work used the machine while the run
  trained (`summary["contention"]["verdict"] == "busy"`). Such a run's speed says as much
  about the neighbours as about the setting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainscale.metrics.stats import is_positive_number

STALL_RATIO = 1.10
"""Mean timed step over median timed step above which a run is flagged as having stalls."""

STALLS = "stalls"
BUSY = "busy"


def mean_over_median(summary: Mapping[str, Any]) -> float | None:
    """The run's mean timed step over its median timed step; None where either is unknown."""
    mean, median = summary.get("step_time_s_mean"), summary.get("step_time_s_median")
    if not (is_positive_number(mean) and is_positive_number(median)):
        return None
    return float(mean) / float(median)


def has_stalls(summary: Mapping[str, Any]) -> bool:
    """Whether a few long steps pull the run's mean step well above its median."""
    ratio = mean_over_median(summary)
    return ratio is not None and ratio > STALL_RATIO


def ran_busy(summary: Mapping[str, Any]) -> bool:
    """Whether other work was found using the machine while the run trained."""
    contention = summary.get("contention")
    return isinstance(contention, Mapping) and contention.get("verdict") == "busy"


def run_flags(summary: Mapping[str, Any]) -> list[str]:
    """The marks a run's summary earns, in a fixed order ([] for a clean run)."""
    return [name for name, on in ((STALLS, has_stalls(summary)), (BUSY, ran_busy(summary))) if on]


def stall_figures(summary: Mapping[str, Any]) -> tuple[float, float] | None:
    """(mean step s, median step s) of a run with stalls; None for a run without."""
    if not has_stalls(summary):
        return None
    return float(summary["step_time_s_mean"]), float(summary["step_time_s_median"])


def stall_text(summary: Mapping[str, Any]) -> str | None:
    """'stalls: mean step 120.6 ms vs median 33.0 ms' for a run with stalls, else None: the
    words every table, report and comparison uses for one run."""
    figures = stall_figures(summary)
    return None if figures is None else f"{STALLS}: {_mean_vs_median(*figures)}"


def stalls_note(summaries: Sequence[Mapping[str, Any]]) -> str | None:
    """What a configuration's runs say of stalls, None when none stalled: 'stalls: mean step
    120.6 ms vs median 33.0 ms in 1 of 3 runs' (with several, the worst run's figures)."""
    stalled = [f for f in (stall_figures(s) for s in summaries) if f is not None]
    if not stalled:
        return None
    mean, median = max(stalled, key=lambda f: f[0] / f[1])
    worst = "" if len(stalled) == 1 else "worst "
    return (
        f"{STALLS}: {worst}{_mean_vs_median(mean, median)} in {len(stalled)} of "
        f"{len(summaries)} run{'' if len(summaries) == 1 else 's'}"
    )


def _mean_vs_median(mean_s: float, median_s: float) -> str:
    return f"mean step {mean_s * 1000:.1f} ms vs median {median_s * 1000:.1f} ms"
