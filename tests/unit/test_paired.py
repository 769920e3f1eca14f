"""`metrics.paired`: ratios within rounds, median and bootstrap interval across rounds."""

from __future__ import annotations

import numpy as np
import pytest

from trainscale.metrics.paired import NO_DIFFERENCE, paired_ratio

# Five rounds in which B does 1.6x, 1.7x, 1.5x, 1.6x and 1.7x A's throughput, while the
# machine's speed drifts by 50% between rounds.
STEADY = [
    {"A": 100.0, "B": 160.0},
    {"A": 80.0, "B": 136.0},
    {"A": 120.0, "B": 180.0},
    {"A": 90.0, "B": 144.0},
    {"A": 110.0, "B": 187.0},
]


def test_ratio_within_each_round_and_median_across_rounds():
    paired = paired_ratio(STEADY, "A", "B")
    assert paired.ratios == pytest.approx((1.6, 1.7, 1.5, 1.6, 1.7))
    assert paired.rounds_used == (0, 1, 2, 3, 4)
    assert paired.median == pytest.approx(1.6)
    assert paired.num_rounds == 5 and not paired.few_rounds
    # The median of resampled rounds can only fall among the rounds' ratios.
    low, high = paired.ci
    assert 1.5 <= low <= 1.6 <= high <= 1.7


def test_an_interval_above_one_says_b_is_faster():
    paired = paired_ratio(STEADY, "A", "B")
    assert paired.direction == "faster"
    assert paired.verdict == "B is faster"
    assert paired.verdict_against("serial") == "faster than serial"
    assert paired.text() == f"1.60x [{paired.ci[0]:.2f}, {paired.ci[1]:.2f}]"


def test_step_times_above_one_say_b_is_slower():
    rounds = [{"A": 0.1, "B": 0.1 * r} for r in (1.6, 1.7, 1.5, 1.6, 1.7)]
    paired = paired_ratio(rounds, "A", "B", measure="step_time")
    assert paired.median == pytest.approx(1.6)
    assert paired.verdict == "B is slower"
    reverse = paired_ratio(rounds, "B", "A", measure="step_time")
    assert reverse.verdict == "A is faster"


def test_noisy_rounds_give_no_measurable_difference():
    rounds = [{"A": 100.0, "B": 100.0 * r} for r in (0.8, 1.3, 0.9, 1.2, 1.05, 0.95, 1.1)]
    paired = paired_ratio(rounds, "A", "B")
    assert paired.median == pytest.approx(1.05)
    low, high = paired.ci
    assert low < 1.0 < high
    assert paired.direction is None
    assert paired.verdict == NO_DIFFERENCE == "no difference measurable here"
    assert paired.verdict_against("serial") == NO_DIFFERENCE


def test_drift_between_rounds_does_not_decide_the_verdict():
    # Unpaired, B's samples (60-200) and A's (50-250) overlap entirely; within each round
    # B is always 20% ahead, and the verdict follows the rounds.
    rounds = [{"A": a, "B": 1.2 * a} for a in (50.0, 250.0, 120.0, 80.0, 170.0, 200.0)]
    paired = paired_ratio(rounds, "A", "B")
    assert paired.ci == pytest.approx((1.2, 1.2))
    assert paired.verdict == "B is faster"


def test_a_failed_run_drops_its_round_for_that_pair_only():
    rounds = [dict(r) for r in STEADY]
    rounds[1]["B"] = None  # B's run failed in round 1
    del rounds[3]["A"]  # A never ran in round 3
    for r, c in zip(rounds, (150.0, 120.0, 180.0, 135.0, 165.0), strict=True):
        r["C"] = c
    paired = paired_ratio(rounds, "A", "B")
    assert paired.rounds_used == (0, 2, 4)
    assert paired.ratios == pytest.approx((1.6, 1.5, 1.7))
    assert paired.median == pytest.approx(1.6)
    assert paired.few_rounds
    assert paired.rounds_note == "3 rounds: with fewer than 5 rounds the interval is wide"
    # B's failure does not cost the C/A pair its round; A's absence does.
    other = paired_ratio(rounds, "A", "C")
    assert other.rounds_used == (0, 1, 2, 4)
    assert other.ratios == pytest.approx((1.5, 1.5, 1.5, 1.5))


def test_nan_counts_as_missing_and_nonpositive_is_refused():
    rounds = [{"A": 1.0, "B": float("nan")}, {"A": 1.0, "B": 2.0}]
    assert paired_ratio(rounds, "A", "B").rounds_used == (1,)
    with pytest.raises(ValueError, match="positive"):
        paired_ratio([{"A": 0.0, "B": 1.0}], "A", "B")


def test_one_round_has_no_interval_and_no_verdict():
    paired = paired_ratio(STEADY[:1], "A", "B")
    assert paired.median == pytest.approx(1.6)
    assert paired.ci is None and paired.direction is None
    assert paired.verdict == NO_DIFFERENCE
    assert paired.text() == "1.60x"
    assert paired.rounds_note == "1 round: no interval"
    none = paired_ratio([{"A": 1.0}], "A", "B")
    assert none.median is None and none.text() == "-" and none.num_rounds == 0


def test_two_rounds_span_the_two_ratios():
    paired = paired_ratio(STEADY[1:3], "A", "B")  # ratios 1.7 and 1.5
    assert paired.median == pytest.approx(1.6)
    assert paired.ci == pytest.approx((1.5, 1.7))
    assert paired.few_rounds


def test_seeded_and_independent_of_global_random_state():
    rounds = [{"A": 100.0, "B": 100.0 * r} for r in (0.9, 1.3, 1.1, 1.25, 0.97, 1.4, 1.02)]
    first = paired_ratio(rounds, "A", "B", seed=3)
    np.random.seed(12345)
    np.random.random(100)
    again = paired_ratio(rounds, "A", "B", seed=3)
    assert first == again
    # The interval is the percentile bootstrap of the median over rounds, with that seed.
    ratios = np.array(first.ratios)
    picks = np.random.default_rng(3).integers(0, ratios.size, size=(first.num_resamples, 7))
    expected = np.percentile(np.median(ratios[picks], axis=1), [2.5, 97.5])
    assert first.ci == pytest.approx(tuple(expected))
    assert first.to_dict()["ci"] == list(first.ci)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="confidence"):
        paired_ratio(STEADY, "A", "B", confidence=1.0)
    with pytest.raises(ValueError, match="num_resamples"):
        paired_ratio(STEADY, "A", "B", num_resamples=5)
    with pytest.raises(ValueError, match="measure"):
        paired_ratio(STEADY, "A", "B", measure="speed")  # type: ignore[arg-type]


def test_busy_rounds_are_left_out_while_a_quiet_round_remains():
    # Round 2 ran busy on A's side: 0.5x there would pull the median down.
    rounds = [{"A": 100.0, "B": 160.0}, {"A": 100.0, "B": 50.0}, {"A": 100.0, "B": 170.0}]
    busy = [{"A": False, "B": False}, {"A": True, "B": False}, {"A": False, "B": False}]
    paired = paired_ratio(rounds, "A", "B", busy=busy)
    assert paired.trusted and paired.busy_rounds == 1
    assert paired.rounds_used == (0, 2) and paired.median == pytest.approx(1.65)
    assert paired.direction == "faster" and paired.verdict == "B is faster"
    assert paired.rounds_note.endswith("; 1 busy round(s) left out")
    assert paired.to_dict()["trusted"] is True and paired.to_dict()["busy_rounds"] == 1
    # Without the marks, the same rounds give the median with the busy round in.
    assert paired_ratio(rounds, "A", "B").median == pytest.approx(1.6)


def test_every_round_busy_gives_the_ratio_with_no_verdict():
    rounds = [{"A": 100.0, "B": 160.0}, {"A": 100.0, "B": 170.0}, {"A": 100.0, "B": 165.0}]
    busy = [{"A": True}, {"B": True}, {"A": True, "B": True}]
    paired = paired_ratio(rounds, "A", "B", busy=busy)
    assert not paired.trusted and paired.busy_rounds == 3
    assert paired.median == pytest.approx(1.65) and paired.ci is not None  # shown as measured
    assert paired.direction is None  # the interval excludes 1, but no verdict rests on it
    assert paired.verdict == "not trusted: busy machine"
    assert paired.verdict_against("serial") == "not trusted: busy machine"
    assert paired.rounds_note == "3 rounds, every one on a busy machine"


def test_a_failed_round_is_not_a_busy_one():
    rounds = [{"A": 100.0, "B": None}, {"A": 100.0, "B": 150.0}]
    busy = [{"A": True, "B": False}, {"A": False, "B": False}]
    paired = paired_ratio(rounds, "A", "B", busy=busy)
    assert paired.trusted and paired.busy_rounds == 0 and paired.rounds_used == (1,)
