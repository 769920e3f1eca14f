"""All-reduce bandwidth arithmetic and the alpha-beta fit."""

from __future__ import annotations

import pytest

from trainscale.metrics.comm import algorithm_bandwidth, bus_bandwidth, fit_alpha_beta


def test_bus_bandwidth_is_the_ring_factor_times_algorithm_bandwidth() -> None:
    assert algorithm_bandwidth(1e9, 0.5) == pytest.approx(2e9)
    assert bus_bandwidth(1e9, 0.5, 2) == pytest.approx(2e9)  # 2 (n-1)/n = 1
    assert bus_bandwidth(1e9, 0.5, 8) == pytest.approx(2e9 * 14 / 8)


def test_fit_recovers_an_exact_line() -> None:
    alpha, beta = 20e-6, 1 / 10e9  # 20 us, 10 GB/s
    sizes = [4096 * 4**i for i in range(8)]
    fit = fit_alpha_beta(sizes, [alpha + beta * m for m in sizes])
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert fit.beta_s_per_byte == pytest.approx(beta, rel=1e-6)
    assert fit.bandwidth_bytes_per_s == pytest.approx(10e9, rel=1e-6)
    assert fit.max_relative_error < 1e-9


def test_negative_latency_is_clamped_to_zero() -> None:
    # Times that grow faster than linearly pull the free intercept below zero.
    sizes = [1e3, 1e4, 1e5]
    fit = fit_alpha_beta(sizes, [1e-7, 1e-5, 1e-3])
    assert fit.alpha_s == 0.0 and fit.beta_s_per_byte > 0


def test_fit_needs_two_sizes_and_positive_times() -> None:
    with pytest.raises(ValueError):
        fit_alpha_beta([1e3, 1e3], [1e-5, 2e-5])
    with pytest.raises(ValueError):
        fit_alpha_beta([1e3, 1e4], [0.0, 1e-5])
