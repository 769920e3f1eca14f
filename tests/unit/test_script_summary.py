"""A script run's figures from its ranks' meters: the slowest rank's step, the global batch
summed over ranks, warm-up steps left out, the data-wait share."""

from __future__ import annotations

import pytest

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
