"""The one definition of a run's step time and throughput (docs/methodology.md). Pure.

A run's step time is the **median** of its timed steps (each the slowest rank's, warm-up
left out); its throughput is a batch over that step time. The median is what a few long
stalls (a page-cache miss, a neighbour's burst, a swapped-out worker) do not move, so two
runs of one setting give the same figure whether or not one of them stalled; the mean,
which the stalls do move, is kept beside it (`step_time_s_mean`, `samples_per_s_mean`) and
a run whose mean is far above its median is flagged (`metrics.run_flags`). A workload whose
steps do unequal work by design (texts of different lengths: `Workload.unequal_steps`) is
rated over its mean step instead (`rated_step_time`), since its median step is a short batch's.

Every consumer (a run's summary, bench, sweep tables, reports, compare, recommend, the
simulator) takes its figures from these functions or from the stored summary they made, so
no two places derive a throughput differently.

Several runs of one configuration (its repeats) are summarised per run first: the
configuration's step time is the median over its runs of each run's median step
(`repeats_step_time`), and its throughput the median over its runs of each run's throughput
(`repeats_throughput`), which is what reports and `trainscale compare` both show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainscale.metrics import stats


def timed_step_time(steps_s: Sequence[float]) -> float:
    """A run's step time: the median of its timed steps (seconds)."""
    if not steps_s:
        raise ValueError("a run's step time needs at least one timed step")
    return stats.median(steps_s)


def mean_step_time(steps_s: Sequence[float]) -> float:
    """The mean of a run's timed steps: kept beside the median, never the headline."""
    if not steps_s:
        raise ValueError("a mean step time needs at least one timed step")
    return sum(steps_s) / len(steps_s)


def rated_step_time(steps_s: Sequence[float], unequal_steps: bool) -> float:
    """The step a run's throughput is over: its median timed step, or its mean where its
    steps do unequal work by design (the median is then a short batch's)."""
    return mean_step_time(steps_s) if unequal_steps else timed_step_time(steps_s)


def stored_step_time(summary: Mapping[str, Any]) -> float:
    """The step a stored run's throughput is over (`rated_step_time` of its steps): its
    `step_time_s_mean` where it declares `unequal_steps`, else its `step_time_s_median`."""
    mean = summary.get("step_time_s_mean")
    if summary.get("unequal_steps") and isinstance(mean, (int, float)) and mean > 0:
        return float(mean)
    return float(summary["step_time_s_median"])


def throughput(batch: float, step_time_s: float) -> float:
    """Samples per second of a `batch` trained every `step_time_s` seconds."""
    if step_time_s <= 0:
        raise ValueError(f"a step time must be positive, got {step_time_s!r}")
    return batch / step_time_s


def repeats_step_time(run_step_times_s: Sequence[float]) -> float:
    """A configuration's step time: the median over its runs of each run's step time."""
    if not run_step_times_s:
        raise ValueError("a configuration's step time needs at least one run")
    return stats.median(run_step_times_s)


def repeats_throughput(run_throughputs: Sequence[float]) -> float:
    """A configuration's throughput: the median over its runs of each run's throughput."""
    if not run_throughputs:
        raise ValueError("a configuration's throughput needs at least one run")
    return stats.median(run_throughputs)
