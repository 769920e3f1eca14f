"""Ratio of medians, bootstrap intervals and the rank test on synthetic step times."""

from __future__ import annotations

import numpy as np
import pytest

from trainscale.metrics.compare import (
    bootstrap_medians,
    compare_step_times,
    lag1_autocorrelation,
    mann_whitney,
    timed_steps,
)


def steps(seed: int, n: int = 200, median_s: float = 0.05, spread: float = 0.1) -> list[float]:
    """Positive, right-skewed step times (lognormal) around `median_s`."""
    rng = np.random.default_rng(seed)
    return list(median_s * np.exp(rng.normal(0.0, spread, size=n)))


def test_identical_distributions_are_not_significant():
    result = compare_step_times([steps(1)], [steps(2)], num_resamples=2000, seed=0)
    low, high = result.throughput_ratio_ci
    assert low <= 1.0 <= high
    slow, shigh = result.step_time_ratio_ci
    assert slow <= 1.0 <= shigh
    assert not result.significant
    assert result.step_time_ratio == pytest.approx(1.0, abs=0.05)
    assert abs(result.rank_biserial) < 0.2
    assert result.mann_whitney_p > 0.05
    assert not result.hierarchical


def test_twenty_percent_slower_is_significant():
    a = steps(1)
    b = list(np.asarray(steps(2)) * 1.2)
    result = compare_step_times([a], [b], num_resamples=2000, seed=0)
    assert result.significant
    assert result.step_time_ratio == pytest.approx(1.2, rel=0.04)
    assert result.throughput_ratio == pytest.approx(1 / 1.2, rel=0.04)
    low, high = result.step_time_ratio_ci
    assert 1.0 < low < result.step_time_ratio < high
    tlow, thigh = result.throughput_ratio_ci
    assert tlow < thigh < 1.0
    assert result.rank_biserial > 0.5  # B's steps are mostly the longer ones
    assert result.mann_whitney_p < 1e-6


def test_seeded_and_deterministic():
    a, b = [steps(3)], [steps(4)]
    first = compare_step_times(a, b, num_resamples=500, seed=7)
    again = compare_step_times(a, b, num_resamples=500, seed=7)
    other = compare_step_times(a, b, num_resamples=500, seed=8)
    assert first == again
    assert first.step_time_ratio_ci != other.step_time_ratio_ci
    assert first.step_time_ratio == other.step_time_ratio  # the point estimate is not random


def test_throughput_ratio_accounts_for_batch():
    a = steps(1)
    # B takes twice as long per step for twice the samples: the same samples/s.
    b = list(np.asarray(steps(2)) * 2.0)
    result = compare_step_times(
        [a], [b], samples_per_step_a=64, samples_per_step_b=128, num_resamples=1000
    )
    assert result.step_time_ratio == pytest.approx(2.0, rel=0.04)
    assert result.throughput_ratio == pytest.approx(1.0, rel=0.04)
    assert not result.significant


def test_hierarchical_bootstrap_widens_the_interval_with_run_to_run_spread():
    # Three repeats per side whose medians differ by +-8%, as repeats on a busy machine do.
    a_runs = [steps(s, n=150, median_s=0.05 * f) for s, f in ((1, 0.92), (2, 1.0), (3, 1.08))]
    b_runs = [steps(s, n=150, median_s=0.05 * f) for s, f in ((4, 0.95), (5, 1.03), (6, 1.1))]
    nested = compare_step_times(a_runs, b_runs, num_resamples=1000, seed=0)
    pooled = compare_step_times(
        [np.concatenate(a_runs)], [np.concatenate(b_runs)], num_resamples=1000, seed=0
    )
    assert nested.hierarchical and not pooled.hierarchical
    assert nested.a.num_runs == 3 and nested.a.num_steps == 450
    width = nested.step_time_ratio_ci[1] - nested.step_time_ratio_ci[0]
    pooled_width = pooled.step_time_ratio_ci[1] - pooled.step_time_ratio_ci[0]
    assert width > 1.5 * pooled_width
    assert not nested.significant  # a 3% difference inside 8% run-to-run noise


def test_hierarchical_bootstrap_finds_a_clear_shift_across_repeats():
    a_runs = [steps(s, median_s=0.05 * f) for s, f in ((1, 0.98), (2, 1.0), (3, 1.02))]
    b_runs = [steps(s, median_s=0.06 * f) for s, f in ((4, 0.98), (5, 1.0), (6, 1.02))]
    result = compare_step_times(a_runs, b_runs, num_resamples=1000, seed=0)
    assert result.significant
    assert result.step_time_ratio == pytest.approx(1.2, rel=0.05)


def test_bootstrap_of_one_run_in_chunks_matches_shape():
    rng = np.random.default_rng(0)
    out = bootstrap_medians([steps(1, n=50)], 300, rng)
    assert out.shape == (300,)
    assert np.all(out > 0)


def test_mann_whitney_against_hand_counts():
    # Pairs (a, b) with b > a: 3 > 1, 3 > 2, 4 > 1, 4 > 2 -> U = 4 of 4 pairs.
    u, r, p = mann_whitney([1.0, 2.0], [3.0, 4.0])
    assert u == 4.0 and r == 1.0
    # Ties count one half: b = 2 ties with a = 2.
    u, r, _ = mann_whitney([1.0, 2.0], [2.0])
    assert u == 1.5 and r == pytest.approx(0.5)
    # Every value equal: no evidence either way.
    assert mann_whitney([1.0, 1.0], [1.0, 1.0]) == (2.0, 0.0, 1.0)


def test_lag1_autocorrelation_sees_slow_stretches():
    rng = np.random.default_rng(0)
    independent = rng.normal(size=2000)
    assert abs(lag1_autocorrelation(independent)) < 0.1
    stretches = np.repeat(rng.normal(size=200), 10)  # runs of 10 equal steps
    assert lag1_autocorrelation(stretches) > 0.8
    assert lag1_autocorrelation([1.0, 2.0]) is None
    assert lag1_autocorrelation([1.0, 1.0, 1.0]) is None


def test_timed_steps_drops_the_warmup():
    assert timed_steps([9.0, 8.0, 1.0, 1.1], 2) == [1.0, 1.1]
    assert timed_steps([1.0, 1.1], 0) == [1.0, 1.1]


@pytest.mark.parametrize(
    "kwargs",
    [{"confidence": 1.0}, {"confidence": 0.0}, {"num_resamples": 10}],
)
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ValueError):
        compare_step_times([steps(1)], [steps(2)], **kwargs)


def test_empty_or_non_positive_steps_are_refused():
    with pytest.raises(ValueError):
        compare_step_times([[]], [steps(1)])
    with pytest.raises(ValueError):
        compare_step_times([[0.0, 1.0]], [steps(1)])
    with pytest.raises(ValueError):
        compare_step_times([], [steps(1)])


def test_a_side_is_the_median_over_its_runs_of_each_run_s_median():
    """The report's statistic, not the pooled steps' median: one long run of fast steps does
    not outvote two short runs of slow ones."""
    a_runs = [[0.010] * 50, [0.030] * 5, [0.040] * 5]  # pooled median 0.010; per run 10/30/40
    b_runs = [[0.020] * 8]
    result = compare_step_times(
        a_runs, b_runs, samples_per_step_a=64, samples_per_step_b=64, num_resamples=500
    )
    assert result.a.run_median_steps_s == pytest.approx([0.010, 0.030, 0.040])
    assert result.a.median_step_s == pytest.approx(0.030)
    assert result.a.samples_per_s == pytest.approx(64 / 0.030)
    assert result.step_time_ratio == pytest.approx(0.020 / 0.030)
    assert result.throughput_ratio == pytest.approx(0.030 / 0.020)  # odd count: reciprocal
    # Every replicate is a median over resampled runs of their medians: always one of them.
    low, high = result.step_time_ratio_ci
    assert 0.020 / 0.040 <= low <= high <= 0.020 / 0.010


def test_with_an_even_count_throughput_is_the_median_of_the_runs_throughputs():
    a_runs = [[0.010] * 9, [0.030] * 9]
    result = compare_step_times(a_runs, [[0.020] * 9], num_resamples=200)
    assert result.a.median_step_s == pytest.approx(0.020)  # (10 + 30) / 2 ms
    assert result.a.samples_per_s == pytest.approx((1 / 0.010 + 1 / 0.030) / 2)
    assert result.throughput_ratio == pytest.approx((1 / 0.020) / result.a.samples_per_s)
    assert bootstrap_medians(a_runs, 50, np.random.default_rng(0)).shape == (50,)


def test_a_side_of_unequal_steps_is_rated_over_its_mean_step() -> None:
    a = [0.1, 0.1, 0.2, 0.8] * 10
    b = [0.1, 0.1, 0.2, 0.4] * 10
    result = compare_step_times(
        [a], [b], unequal_steps_a=True, unequal_steps_b=True, num_resamples=500
    )
    assert result.throughput_ratio == pytest.approx(np.mean(a) / np.mean(b))
    assert result.step_time_ratio == pytest.approx(1.0)  # the medians: the short batches
    low, high = result.throughput_ratio_ci
    assert 1.0 < low <= result.throughput_ratio <= high
    # Rated over the median, as a workload of equal steps is, the two would tie.
    plain = compare_step_times([a], [b], num_resamples=500)
    assert plain.throughput_ratio == pytest.approx(1.0) and not plain.significant


def test_one_timed_step_a_side_is_never_called_significant():
    # One step has no spread to resample: the interval has no width and excludes 1.0.
    result = compare_step_times([[0.10]], [[0.135]], num_resamples=500, seed=0)
    assert result.throughput_ratio_ci[0] == result.throughput_ratio_ci[1] != 1.0
    assert not result.significant
    # Two steps a side are judged.
    assert compare_step_times([[0.10, 0.101]], [[0.135, 0.136]], num_resamples=500).significant
