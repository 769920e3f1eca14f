"""A script run's figures from its ranks' meters: the slowest rank's step, the global batch
summed over ranks, warm-up steps left out, the data-wait share; ranks that disagree on their
samples or their steps recorded, and the frameworks the script used."""

from __future__ import annotations

import pytest

from trainscale.errors import WorkloadError
from trainscale.frameworks import version
from trainscale.reporting.script_notes import disagreement_text, frameworks_text
from trainscale.runner.script_worker import frameworks_seen
from trainscale.train.meter import ScriptMeasurements
from trainscale.train.script_summary import NO_TARGET, summarize_script


def _rank(steps: list[float], waits: list[float], curve=()) -> ScriptMeasurements:
    return ScriptMeasurements(
        step_times_s=steps, data_wait_s=waits, samples=[32] * len(steps), curve=list(curve)
    )


def test_two_ranks_by_the_one_rule() -> None:
    rank0 = _rank([9.0, 1.0, 1.0, 1.0], [0.0, 0.5, 0.5, 0.5], [(2.0, 2, 0.5), (4.0, 4, 0.9)])
    rank1 = _rank([9.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0])
    workers = [{"peak_rss_bytes": 1}, {"peak_rss_bytes": 2}]
    out = summarize_script([rank0, rank1], workers, 1, 0.8)
    m = out.metrics
    assert out.step_times_s == [9.0, 2.0, 2.0, 2.0]
    assert m.step_time_s_median == 2.0  # the slowest rank's, warm-up step left out
    assert m.samples_per_s == pytest.approx(64 / 2.0)  # global: both ranks' samples
    assert (m.num_timed_steps, m.num_samples) == (3, 4 * 64)
    assert (m.test_accuracy, m.time_to_target_s) == (0.9, 4.0)
    assert out.extra["data_wait_share"] == pytest.approx(0.5)  # rank 0's: 1.5 s of 3 s
    assert out.extra["data_wait_share_per_worker"] == pytest.approx([0.5, 0.0])
    assert out.extra["global_batch_measured"] == 64
    assert out.extra["target_accuracy_given"] is True


def test_no_evaluation_no_accuracy_and_no_target_given() -> None:
    out = summarize_script([_rank([1.0, 1.0], [0.0, 0.2])], [{"peak_rss_bytes": 1}], 5, None)
    assert out.metrics.test_accuracy is None
    assert out.metrics.target_accuracy == NO_TARGET
    assert out.extra["target_accuracy_given"] is False
    assert out.metrics.num_timed_steps == 2  # shorter than the warm-up: every step counts


TWO = [{"peak_rss_bytes": 1}, {"peak_rss_bytes": 1}]


def _samples(steps: int, samples: int) -> ScriptMeasurements:
    return ScriptMeasurements(
        step_times_s=[1.0] * steps, data_wait_s=[0.0] * steps, samples=[samples] * steps
    )


def test_steps_that_counted_no_samples_have_no_throughput_to_store() -> None:
    # samples=len(x) of an empty batch every step: a global batch of 0, not one of 1 and
    # tens of thousands of samples a second.
    with pytest.raises(WorkloadError, match="counted 0 samples in its timed steps"):
        summarize_script([_samples(10, 0)], [{"peak_rss_bytes": 1}], 1, None)
    out = summarize_script([_samples(10, 1)], [{"peak_rss_bytes": 1}], 1, None)
    assert out.extra["global_batch_measured"] == 1  # one sample a step is a batch


def test_ranks_that_agree_are_said_to() -> None:
    out = summarize_script([_samples(4, 32), _samples(4, 32)], TWO, 1, None)
    assert out.extra["samples_per_worker_median"] == [32, 32]
    assert out.extra["samples_disagree"] is False and out.extra["samples_disagree_steps"] == 0
    assert out.extra["steps_disagree"] is False
    assert disagreement_text(out.extra) is None


def test_a_rank_that_passes_the_global_batch_and_takes_a_step_more_is_recorded() -> None:
    # Rank 0 passes the global batch (64), rank 1 its own part (32), and rank 0 trains on.
    out = summarize_script([_samples(5, 64), _samples(4, 32)], TWO, 1, None)
    extra = out.extra
    assert extra["samples_per_worker_median"] == [64, 32]
    assert extra["samples_disagree"] is True and extra["samples_disagree_steps"] == 4
    assert extra["steps_per_worker"] == [5, 4] and extra["steps_disagree"] is True
    assert extra["global_batch_measured"] == 96  # the sum as given: the warning says so
    assert out.metrics.num_steps == 4  # the steps every rank took
    text = disagreement_text(extra)
    assert text is not None
    assert "different samples= in 4 step(s) (median per rank: 64, 32)" in text
    assert "96 samples a step, so it is too high if a rank passed the global batch" in text
    assert "different numbers of steps (5, 4)" in text and "the 4 steps every rank took" in text


def test_only_a_short_last_batch_differs() -> None:
    rank0 = ScriptMeasurements([1.0] * 3, [0.0] * 3, [32, 32, 10])
    rank1 = ScriptMeasurements([1.0] * 3, [0.0] * 3, [32, 32, 9])
    extra = summarize_script([rank0, rank1], TWO, 0, None).extra
    assert extra["samples_disagree_steps"] == 1 and extra["samples_per_worker_median"] == [32, 32]


def test_the_frameworks_every_rank_saw_are_stored() -> None:
    workers = [
        {"peak_rss_bytes": 1, "frameworks": {"pytorch": "2.5.1"}},
        {"peak_rss_bytes": 1, "frameworks": {"pytorch": "2.5.1", "jax": "0.4.30"}},
    ]
    out = summarize_script([_samples(2, 8), _samples(2, 8)], workers, 0, None)
    assert out.extra["frameworks"] == {"pytorch": "2.5.1", "jax": "0.4.30"}
    assert frameworks_text(out.extra) == "pytorch 2.5.1, jax 0.4.30"


def test_frameworks_seen_in_the_modules_a_script_left() -> None:
    assert frameworks_seen({"torch": object(), "numpy": object()}) == {
        "pytorch": version("pytorch")
    }
    seen = frameworks_seen({"torch": object(), "jax": object(), "tensorflow": object()})
    assert list(seen) == ["pytorch", "tensorflow", "jax"]
    assert seen["jax"] == version("jax")  # the installed release, None where not installed
