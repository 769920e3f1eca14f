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

from collections.abc import Mapping
from typing import Any

STALL_RATIO = 1.10
"""Mean timed step over median timed step above which a run is flagged as having stalls."""

STALLS = "stalls"
BUSY = "busy"


def mean_over_median(summary: Mapping[str, Any]) -> float | None:
    """The run's mean timed step over its median timed step; None where either is unknown."""
    mean, median = summary.get("step_time_s_mean"), summary.get("step_time_s_median")
    if not (_positive(mean) and _positive(median)):
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


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
