"""Collective-communication arithmetic: all-reduce bandwidths and the alpha-beta model. Pure.

An all-reduce of `size` bytes that takes `time_s` has

    algorithm bandwidth  algbw = size / time_s
    bus bandwidth        busbw = algbw x 2 (n - 1) / n

busbw is what each link carries in a ring all-reduce (every rank sends and receives
2 (n - 1) / n of the message), so it compares across process counts (nccl-tests' convention).

The alpha-beta (Hockney) model says a message of m bytes takes

    t(m) = alpha + beta x m

alpha is the fixed latency (s) and beta the inverse bandwidth (s per byte) of the whole
collective at this process count. The fit is least squares on **relative** error (weights
1 / t^2): the measured times span four orders of magnitude, and plain least squares would
fit the large messages and leave alpha to noise. Both parameters are constrained to be
non-negative (a negative latency is noise, not physics).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def algorithm_bandwidth(size_bytes: float, time_s: float) -> float:
    """Message bytes per second of all-reduce time."""
    return size_bytes / time_s


def bus_bandwidth(size_bytes: float, time_s: float, ranks: int) -> float:
    """algbw x 2 (n - 1) / n: the bytes each rank's link moves per second in a ring."""
    return algorithm_bandwidth(size_bytes, time_s) * 2 * (ranks - 1) / ranks


@dataclass(frozen=True)
class AlphaBeta:
    """t(m) = alpha_s + beta_s_per_byte x m, fitted to measured all-reduce times."""

    alpha_s: float
    beta_s_per_byte: float
    max_relative_error: float
    """Largest |model - measured| / measured over the points fitted."""
    num_points: int

    @property
    def bandwidth_bytes_per_s(self) -> float | None:
        """1 / beta: the asymptotic algorithm bandwidth (None when beta is 0)."""
        return 1.0 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else None

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "alpha_s": self.alpha_s,
            "beta_s_per_byte": self.beta_s_per_byte,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "max_relative_error": self.max_relative_error,
            "num_points": self.num_points,
        }


def fit_alpha_beta(sizes_bytes: Sequence[float], times_s: Sequence[float]) -> AlphaBeta:
    """Weighted least squares of t = alpha + beta m (weights 1/t^2), alpha, beta >= 0.

    Needs at least two distinct sizes and positive times; ValueError otherwise.
    """
    if len(sizes_bytes) != len(times_s):
        raise ValueError("sizes and times differ in length")
    points = [(float(m), float(t)) for m, t in zip(sizes_bytes, times_s, strict=True)]
    if any(t <= 0 or not math.isfinite(t) for _, t in points):
        raise ValueError("all-reduce times must be positive and finite")
    if len({m for m, _ in points}) < 2:
        raise ValueError("the alpha-beta fit needs at least two message sizes")
    weights = [1.0 / (t * t) for _, t in points]
    # Normal equations of min sum w (alpha + beta m - t)^2.
    s_w = sum(weights)
    s_m = sum(w * m for w, (m, _) in zip(weights, points, strict=True))
    s_mm = sum(w * m * m for w, (m, _) in zip(weights, points, strict=True))
    s_t = sum(w * t for w, (_, t) in zip(weights, points, strict=True))
    s_mt = sum(w * m * t for w, (m, t) in zip(weights, points, strict=True))
    det = s_w * s_mm - s_m * s_m
    alpha = (s_mm * s_t - s_m * s_mt) / det
    beta = (s_w * s_mt - s_m * s_t) / det
    # The constrained optimum lies on a boundary when the free one is outside the region.
    if alpha < 0:
        alpha, beta = 0.0, s_mt / s_mm
    if beta < 0:
        alpha, beta = s_t / s_w, 0.0
    worst = max(abs(alpha + beta * m - t) / t for m, t in points)
    return AlphaBeta(
        alpha_s=alpha, beta_s_per_byte=beta, max_relative_error=worst, num_points=len(points)
    )
