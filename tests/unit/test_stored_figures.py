"""A stored run's figures, typed: what each reader got from `summary.get` with its own type
check, said once (results/stored_figures.py)."""

from __future__ import annotations

import json
import math

from trainscale.hardware.figures import Devices, HardwareFigures
from trainscale.results.stored_figures import StoredDevices, StoredFigures

from tests.helpers.trainer_output import trainer_summary


def test_a_real_runs_summary_reads_back_as_the_trainer_wrote_it():
    summary = trainer_summary({})
    figures = StoredFigures.of(summary)
    assert figures.samples_per_s == summary["samples_per_s"] > 0
    assert figures.step_time_s_median == summary["step_time_s_median"] > 0
    assert figures.step_time_s_mean == summary["step_time_s_mean"]
    assert figures.step_time_s_iqr == summary["step_time_s_iqr"]
    assert figures.train_time_s == summary["train_time_s"]
    assert figures.flops_per_sample == summary["flops_per_sample"] > 0
    assert figures.num_steps == summary["num_steps"] == 3
    assert figures.planned_steps == summary["planned_steps"]
    assert figures.warmup_steps_excluded == summary["warmup_steps_excluded"]
    assert set(figures.breakdown_s) >= {"data", "forward", "backward", "optimizer"}
    assert figures.peak_memory_bytes == max(summary["peak_memory_bytes_per_worker"])
    assert figures.worker_cores == frozenset(summary["workers"][0]["cores"])
    assert figures.unequal_steps is False


def test_a_summary_without_figures_has_none_measured():
    assert StoredFigures.of({}) == StoredFigures()
    assert not StoredFigures().evaluated and StoredFigures().step_time_rel_iqr is None


def test_a_value_of_the_wrong_type_means_what_a_missing_one_does():
    wrong = {
        "samples_per_s": "fast",
        "step_time_s_median": True,  # an int to Python, never a time
        "test_accuracy": math.nan,  # JSON as Python writes it can hold NaN
        "flops_per_sample": 0,  # not counted
        "num_steps": 2.5,
        "warmup_steps_excluded": None,
        "accuracy_curve": "none",
        "breakdown_s": [1, 2],
        "workers": {"cores": [0]},
        "peak_memory_bytes_per_worker": ["a lot"],
    }
    assert StoredFigures.of(wrong) == StoredFigures()


def test_parts_that_are_not_numbers_are_left_out_one_by_one():
    figures = StoredFigures.of(
        {
            "accuracy_curve": [[1.0, 0.5], [2.0, "high"], [3.0], [4, 0.9]],
            "breakdown_s": {"data": 0.1, "forward": None, "backward": 0.2},
            "workers": [{"cores": [0, 1]}, {"cores": [2, True]}, "broken", {"cores": None}],
            "peak_memory_bytes_per_worker": [100, None, 300],
        }
    )
    assert figures.accuracy_curve == ((1.0, 0.5), (4.0, 0.9))
    assert figures.evaluated
    assert figures.breakdown_s == {"data": 0.1, "backward": 0.2}
    assert figures.worker_cores == {0, 1, 2}
    assert figures.peak_memory_bytes == 300.0


def test_a_run_stored_before_per_worker_memory_has_one_figure():
    assert StoredFigures.of({"peak_memory_bytes_per_worker": 512}).peak_memory_bytes == 512.0


def test_the_step_times_spread_is_its_iqr_over_its_median():
    figures = StoredFigures.of({"step_time_s_median": 0.2, "step_time_s_iqr": 0.05})
    assert figures.step_time_rel_iqr == 0.25
    no_median = StoredFigures.of({"step_time_s_median": 0, "step_time_s_iqr": 0.05})
    assert no_median.step_time_rel_iqr is None


def test_the_hardware_figures_a_run_stores_read_back_typed():
    # As the runner stores them: HardwareFigures.summary() beside the energy meters' readings.
    stored = HardwareFigures(
        hardware=Devices("cuda", "NVIDIA H100 80GB HBM3", 2, "h100-sxm"),
        achieved_tflops=120.5,
        mfu=0.3,
        mfu_vs_probe=0.4,
    ).summary()
    stored = json.loads(json.dumps({**stored, "energy_j": {"gpu_j": 900.0, "cpu_package_j": None}}))
    figures = StoredFigures.of(stored)
    assert figures.hardware == StoredDevices("cuda", 2, "h100-sxm", "NVIDIA H100 80GB HBM3")
    assert (figures.achieved_tflops, figures.mfu, figures.mfu_vs_probe) == (120.5, 0.3, 0.4)
    assert figures.energy_j == {"gpu_j": 900.0}


def test_devices_recorded_badly_are_not_recorded():
    for hardware in ("gpu", {"devices": "2"}, {"devices": 1.5}, {"devices": True}, {}):
        assert StoredFigures.of({"hardware": hardware}).hardware is None
    odd = StoredDevices.of({"devices": 4, "device_type": 7, "kind": "", "device": ["x"]})
    assert odd == StoredDevices("cpu", 4, None, None)
    assert StoredFigures.of({"energy_j": [1.0], "mfu": "high"}) == StoredFigures()


def test_one_timed_step_has_no_spread():
    # A bench run of 5 steps, 4 of them warm-up: its IQR of 0 is no sign of a steady step.
    base = {"step_time_s_median": 0.05, "step_time_s_iqr": 0.0, "num_steps": 5}
    one = StoredFigures.of({**base, "warmup_steps_excluded": 4})
    assert one.step_time_rel_iqr is None
    two = StoredFigures.of({**base, "warmup_steps_excluded": 3})
    assert two.step_time_rel_iqr == 0.0
