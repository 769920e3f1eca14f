"""Scaling arithmetic: Amdahl's law, its fit to measured speedups, spread and noise. No I/O.

Amdahl's model of a run that spends a fraction `s` of its single-worker time in work that
does not parallelise (the serial fraction) and the rest in work that divides evenly over `n`
workers:

    S(n) = 1 / (s + (1 - s) / n)

so S(1) = 1, S(n) <= n, and S(n) tends to 1 / s as n grows. `s = 0` is perfect scaling.

The fit uses the model's linear form. Writing the time per sample relative to the baseline
as 1 / S(n), Amdahl says

    1 / S(n) - 1 / n = s * (1 - 1 / n)

which is a straight line through the origin in x = 1 - 1/n, y = 1/S - 1/n. Least squares on
it has a closed form, s = sum(x*y) / sum(x*x): no optimiser, no starting guess, and a single
point gives that point's Karp-Flatt metric exactly. It is least squares on relative time
(1/S) rather than on speedup, the scale on which the model is linear. Points at n = 1 carry
no information about s (every s predicts S(1) = 1) and drop out by themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainscale.metrics import stats

NOISY_RELATIVE_IQR = 0.10
"""A spread (IQR) wider than this fraction of the median marks a measurement as noisy."""


def amdahl_speedup(serial_fraction: float, workers: float) -> float:
    """Amdahl's predicted speedup S(n) = 1 / (s + (1 - s) / n) for `workers` = n.

    `workers` may be `math.inf`: the limit is 1 / s (infinite for s = 0).
    """
    s = serial_fraction
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"serial fraction must be in [0, 1], not {s!r}")
    if workers <= 0:
        raise ValueError(f"workers must be positive, not {workers!r}")
    if math.isinf(workers):
        return math.inf if s == 0.0 else 1.0 / s
    return 1.0 / (s + (1.0 - s) / workers)


@dataclass(frozen=True)
class AmdahlFit:
    """Amdahl's law fitted to measured (workers, speedup) points."""

    serial_fraction: float
    """The fitted s, clamped to [0, 1]."""
    raw_serial_fraction: float
    """The least-squares s before clamping (below 0: superlinear; above 1: slowdown)."""
    num_points: int
    """Points with more than one worker that the fit used."""
    rmse_speedup: float
    """Root-mean-square difference between measured and predicted speedup, over all points."""

    @property
    def clamped(self) -> bool:
        """Whether the data pushed s outside [0, 1] (Amdahl cannot describe it there)."""
        return self.serial_fraction != self.raw_serial_fraction

    @property
    def max_speedup(self) -> float:
        """The limit 1 / s as workers grow without bound."""
        return amdahl_speedup(self.serial_fraction, math.inf)

    def predict(self, workers: float) -> float:
        """Predicted speedup at `workers`."""
        return amdahl_speedup(self.serial_fraction, workers)


def fit_amdahl(points: Sequence[tuple[float, float]]) -> AmdahlFit | None:
    """Least-squares serial fraction from (workers, speedup) points; None if undetermined.

    Points with n = 1 are kept for the residual but say nothing about s; when no point has
    more than one worker the fit is undetermined and None is returned. Points with a
    non-positive speedup (a failed measurement) are a ValueError.
    """
    xs: list[float] = []
    ys: list[float] = []
    for workers, speedup_value in points:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers!r}")
        if not speedup_value > 0:
            raise ValueError(f"speedup must be positive, not {speedup_value!r}")
        if workers > 1:
            xs.append(1.0 - 1.0 / workers)
            ys.append(1.0 / speedup_value - 1.0 / workers)
    if not xs:
        return None
    raw = sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
    s = min(1.0, max(0.0, raw))
    residuals = [speedup_value - amdahl_speedup(s, workers) for workers, speedup_value in points]
    rmse = math.sqrt(sum(r * r for r in residuals) / len(residuals))
    return AmdahlFit(
        serial_fraction=s, raw_serial_fraction=raw, num_points=len(xs), rmse_speedup=rmse
    )


def relative_iqr(values: Sequence[float]) -> float | None:
    """IQR / median of `values`: the spread as a fraction; None for fewer than two values.

    One value has no spread to speak of, and a zero median has no scale to compare with.
    """
    if len(values) < 2:
        return None
    middle = stats.median(values)
    if middle == 0:
        return None
    return stats.iqr(values) / abs(middle)


def is_noisy(relative_spread: float | None, threshold: float = NOISY_RELATIVE_IQR) -> bool:
    """Whether a relative spread (IQR / median) is wider than `threshold`; unknown is not."""
    return relative_spread is not None and relative_spread > threshold
