"""Amdahl's law, its least-squares fit, and the noise rule, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from trainscale.metrics.scaling import (
    amdahl_speedup,
    fit_amdahl,
    is_noisy,
    relative_iqr,
)


def karp_flatt(workers: float, speedup_value: float) -> float:
    """The serial fraction one (workers, speedup) point implies (Karp and Flatt, 1990):
    e = (1/S - 1/n) / (1 - 1/n)."""
    return (1.0 / speedup_value - 1.0 / workers) / (1.0 - 1.0 / workers)


def test_amdahl_speedup_hand_values() -> None:
    # s = 0.1: S(2) = 1 / (0.1 + 0.9 / 2) = 1 / 0.55; S(4) = 1 / 0.325; S(inf) = 1 / 0.1.
    assert amdahl_speedup(0.1, 2) == pytest.approx(1.8181818181)
    assert amdahl_speedup(0.1, 4) == pytest.approx(3.0769230769)
    assert amdahl_speedup(0.1, math.inf) == pytest.approx(10.0)
    assert amdahl_speedup(0.1, 1) == pytest.approx(1.0)


def test_amdahl_speedup_edges() -> None:
    assert amdahl_speedup(0.0, 8) == pytest.approx(8.0)  # perfect scaling
    assert amdahl_speedup(0.0, math.inf) == math.inf
    assert amdahl_speedup(1.0, 8) == pytest.approx(1.0)  # nothing parallelises
    with pytest.raises(ValueError, match="serial fraction"):
        amdahl_speedup(-0.1, 2)
    with pytest.raises(ValueError, match="workers"):
        amdahl_speedup(0.1, 0)


def test_fit_recovers_exact_serial_fraction() -> None:
    points = [(n, amdahl_speedup(0.1, n)) for n in (1, 2, 4, 8)]
    fit = fit_amdahl(points)
    assert fit is not None
    assert fit.serial_fraction == pytest.approx(0.1)
    assert fit.num_points == 3  # n = 1 says nothing about s
    assert fit.rmse_speedup == pytest.approx(0.0, abs=1e-12)
    assert fit.max_speedup == pytest.approx(10.0)
    assert fit.predict(2) == pytest.approx(1.8181818181)
    assert not fit.clamped


def test_fit_is_least_squares_on_inverse_speedup() -> None:
    # y = 1/S - 1/n, x = 1 - 1/n; s = sum(xy) / sum(xx).
    # (2, 1.6): x = 0.5, y = 0.125.  (4, 2.5): x = 0.75, y = 0.15.
    # s = (0.0625 + 0.1125) / (0.25 + 0.5625) = 0.175 / 0.8125 = 0.2153846...
    fit = fit_amdahl([(2, 1.6), (4, 2.5)])
    assert fit is not None
    assert fit.serial_fraction == pytest.approx(0.175 / 0.8125)


def test_fit_single_point_is_its_karp_flatt_metric() -> None:
    # (2, 1.6): (1/1.6 - 1/2) / (1 - 1/2) = 0.125 / 0.5 = 0.25.
    fit = fit_amdahl([(2, 1.6)])
    assert fit is not None
    assert fit.serial_fraction == pytest.approx(0.25)
    assert karp_flatt(2, 1.6) == pytest.approx(0.25)
    assert fit.num_points == 1


def test_fit_undetermined_without_more_than_one_worker() -> None:
    assert fit_amdahl([]) is None
    assert fit_amdahl([(1, 1.0)]) is None
    assert fit_amdahl([(1, 1.0), (1, 1.1)]) is None


def test_fit_clamps_to_the_unit_interval() -> None:
    superlinear = fit_amdahl([(2, 2.5)])  # 1/2.5 - 1/2 < 0
    assert superlinear is not None
    assert superlinear.serial_fraction == 0.0
    assert superlinear.raw_serial_fraction < 0
    assert superlinear.clamped
    assert superlinear.max_speedup == math.inf
    slowdown = fit_amdahl([(4, 0.5)])  # slower than one worker: raw s > 1
    assert slowdown is not None
    assert slowdown.serial_fraction == 1.0
    assert slowdown.raw_serial_fraction > 1
    assert slowdown.predict(4) == pytest.approx(1.0)


def test_fit_rejects_impossible_points() -> None:
    with pytest.raises(ValueError, match="speedup"):
        fit_amdahl([(2, 0.0)])
    with pytest.raises(ValueError, match="workers"):
        fit_amdahl([(0, 1.0)])


def test_relative_iqr_and_noise_rule() -> None:
    # [60, 90, 120]: quartiles 75 and 105 (linear interpolation), IQR 30, median 90.
    assert relative_iqr([60.0, 90.0, 120.0]) == pytest.approx(30 / 90)
    assert is_noisy(relative_iqr([60.0, 90.0, 120.0]))
    # [100, 102, 98]: quartiles 99 and 101, IQR 2, median 100: 2%.
    assert relative_iqr([100.0, 102.0, 98.0]) == pytest.approx(0.02)
    assert not is_noisy(0.02)
    assert not is_noisy(0.10)  # the rule is "more than 10%"
    assert is_noisy(0.1001)
    assert relative_iqr([5.0]) is None  # one value: no spread to judge
    assert not is_noisy(None)
    assert relative_iqr([0.0, 0.0]) is None
