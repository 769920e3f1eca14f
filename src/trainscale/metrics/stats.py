"""Pure measurement arithmetic, units in the names. No torch, no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeGuard


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation (numpy's default method)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50.0)


def iqr(values: Sequence[float]) -> float:
    """Inter-quartile range: the spread we report beside a median."""
    return percentile(values, 75.0) - percentile(values, 25.0)


def elementwise_max(per_rank: Sequence[Sequence[float]]) -> list[float]:
    """Per-step time of a data-parallel run: the slowest rank's time at each step."""
    lengths = {len(times) for times in per_rank}
    if len(lengths) > 1:
        raise ValueError(f"ranks recorded different step counts: {sorted(lengths)}")
    return [max(step) for step in zip(*per_rank, strict=True)]


def samples_per_s(global_batch_size: int, step_time_s: float) -> float:
    """Global throughput: all workers' samples per second of training clock."""
    return global_batch_size / step_time_s


def speedup(baseline_samples_per_s: float, samples_per_s_value: float) -> float:
    """Throughput ratio against a named baseline run (same machine, workload, semantics)."""
    return samples_per_s_value / baseline_samples_per_s


def efficiency(speedup_value: float, num_units: int) -> float:
    """Parallel efficiency: speedup per worker (or per core, or device: say which)."""
    return speedup_value / num_units


def first_reaching(curve: Sequence[tuple[float, float]], target: float) -> float | None:
    """Training-clock time at which a (time_s, metric) curve first reaches `target`."""
    for time_s, value in curve:
        if value >= target:
            return time_s
    return None


def is_positive_number(value: object) -> TypeGuard[float]:
    """Whether a stored figure is a number above zero (booleans, None and text are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
