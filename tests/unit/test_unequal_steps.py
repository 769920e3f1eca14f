"""Steps of unequal work by design (texts of different lengths, batched by length): the
run's throughput is the batch over the mean timed step, not the median (a short batch's),
and a mean far above the median is not called a stall. Equal-work workloads keep the median
rule (docs/methodology.md)."""

from __future__ import annotations

from typing import Any

import pytest

from trainscale.cli.run_cmd import format_result
from trainscale.metrics.run_flags import has_stalls, stall_text
from trainscale.train.summary import TrainMeasurements, summarize
from trainscale.workloads import get_workload

# Short, medium and long batches, as length bucketing deals them: the median step is a
# short batch's (0.2 s) while the steps average 0.4 s; the first step is warm-up.
STEPS_S = [5.0, 0.1, 0.2, 0.2, 0.3, 1.2]


def _measurements(unequal_steps: bool) -> TrainMeasurements:
    return TrainMeasurements(
        global_batch_size=64,
        per_worker_batch_size=32,
        warmup_steps_untimed=1,
        target_accuracy=0.86,
        step_times_s=STEPS_S,
        curve=[],
        epochs=[],
        train_clock_s=sum(STEPS_S),
        eval_time_s=0.0,
        evaluated=False,
        final=None,
        workers=[{"peak_rss_bytes": 1}, {"peak_rss_bytes": 1}],
        breakdowns=[{}, {}],
        comm_marked=False,
        breakdown_sampled_steps=0,
        flops=None,
        pretrain_s=None,
        compile_s=None,
        unequal_steps=unequal_steps,
    )


def test_unequal_steps_are_rated_over_the_mean_step() -> None:
    summary = summarize(_measurements(unequal_steps=True)).to_dict()
    assert summary["step_time_s_median"] == pytest.approx(0.2)
    assert summary["step_time_s_mean"] == pytest.approx(0.4)
    assert summary["samples_per_s"] == pytest.approx(64 / 0.4)
    assert summary["samples_per_s_per_worker"] == pytest.approx(32 / 0.4)
    assert summary["samples_per_s"] == pytest.approx(summary["samples_per_s_mean"])
    assert summary["unequal_steps"] is True
    # The same steps from a workload of equal steps: the median rule, and a stall.
    equal = summarize(_measurements(unequal_steps=False)).to_dict()
    assert equal["samples_per_s"] == pytest.approx(64 / 0.2)
    assert equal["unequal_steps"] is False
    assert has_stalls(equal) and stall_text(equal) is not None
    assert not has_stalls(summary) and stall_text(summary) is None


def test_the_run_line_says_which_step_the_throughput_is_over() -> None:
    summary = summarize(_measurements(unequal_steps=True)).to_dict()
    result: dict[str, Any] = {
        **summary,
        "run_id": "abcdef0123",
        "workload": "imdb-bilstm",
        "status": "completed",
        "data": "real",
        "world_size": 2,
        "threads_per_worker": 1,
        "affinity": "compact",
        "precision": "bf16",
        "global_batch_size": 64,
    }
    text = format_result(result)
    assert (
        "throughput 160.0 samples/s over the mean step (texts of unequal length), "
        "median step 200.0 ms" in text
    )
    assert "stalls" not in text
    assert "over the mean" not in format_result({**result, "unequal_steps": False})


@pytest.mark.parametrize(
    ("name", "unequal"),
    [
        ("imdb-bilstm", True),
        ("imdb-bigru", True),
        ("tweets-text", True),
        ("mnist-cnn", False),
        ("mnist-dbn", False),
        ("cifar10-resnet44", False),
    ],
)
def test_the_text_workloads_declare_unequal_steps(name: str, unequal: bool) -> None:
    assert get_workload(name).unequal_steps is unequal
