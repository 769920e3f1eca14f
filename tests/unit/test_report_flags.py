"""A report's flags from its runs: stalls (mean step beside the median) and efficiency above
100%, per configuration and for the whole report."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from trainscale.reporting.build import load_report_data

from tests.helpers.report_store import FixtureConfig, build_store, run_id

SWEEP = "5eed0000aaaabbbbccccddddeeeeffff"


def _configs() -> list[FixtureConfig]:
    return [
        FixtureConfig("serial", "mnist-cnn", 1, 1, "compact", [100.0, 101.0, 99.0]),
        # 2 workers at 230 samples/s against a 100 samples/s single core: 115% efficiency.
        FixtureConfig("2 pinned workers", "mnist-cnn", 2, 1, "compact", [230.0, 232.0, 228.0]),
    ]


def _stall(path: Path, config_index: int, repeat: int, mean_over_median: float) -> None:
    """Give one stored run a mean step `mean_over_median` times its median."""
    conn = sqlite3.connect(path)
    rid = run_id(config_index, repeat)
    (text,) = conn.execute("SELECT summary_json FROM runs WHERE run_id = ?", (rid,)).fetchone()
    summary = json.loads(text)
    summary["step_time_s_mean"] = summary["step_time_s_median"] * mean_over_median
    conn.execute("UPDATE runs SET summary_json = ? WHERE run_id = ?", (json.dumps(summary), rid))
    conn.commit()
    conn.close()


def test_a_configuration_with_a_stalled_run_says_so_with_its_mean_and_median(tmp_path):
    store = build_store(tmp_path / "s.db", _configs())
    _stall(store, 0, 1, 3.0)  # the serial baseline's second repeat: 3x its median
    data = load_report_data(store, sweep_id=SWEEP)
    serial, pinned = data.workloads[0].configurations
    step_ms = 64 / 101.0 * 1000
    # Both figures the stalled run's own (the row's median, over the runs, is 640.0 ms).
    assert f"{serial.step_time_s_median * 1000:.1f}" == "640.0"
    expected = f"stalls: mean step {3 * step_ms:.1f} ms vs median {step_ms:.1f} ms in 1 of 3 runs"
    assert expected in serial.notes
    assert serial.stalled_runs == 1
    assert pinned.stalled_runs == 0
    assert not any(note.startswith("stalls") for note in pinned.notes)
    assert any("1 configuration(s) had runs with stalls" in note for note in data.notes)


def test_efficiency_above_100_percent_is_flagged_as_implausible(tmp_path):
    store = build_store(tmp_path / "s.db", _configs())
    data = load_report_data(store, sweep_id=SWEEP)
    serial, pinned = data.workloads[0].configurations
    assert pinned.efficiency_per_worker is not None and pinned.efficiency_per_worker > 1.0
    (note,) = [n for n in pinned.notes if "above 100%" in n]
    assert note.startswith("efficiency 115% is above 100%: implausible")
    assert "contention or stalls" in note and "different batch" in note
    assert not any("above 100%" in n for n in serial.notes)
    (report_note,) = [n for n in data.notes if "efficiency above 100%" in n]
    assert "2 pinned workers" in report_note and "turbo" in report_note


def test_a_plausible_report_has_neither_flag(tmp_path):
    configs = _configs()
    configs[1].rates = [180.0, 182.0, 178.0]
    data = load_report_data(build_store(tmp_path / "s.db", configs), sweep_id=SWEEP)
    assert not any("above 100%" in n or "stalls" in n for n in data.notes)
    for config in data.workloads[0].configurations:
        assert not any("above 100%" in n or n.startswith("stalls") for n in config.notes)


def test_efficiency_above_100_percent_from_a_lower_precision_is_explained_not_flagged(tmp_path):
    configs = _configs()
    configs[1].extra_config = {"precision": "bf16"}
    data = load_report_data(build_store(tmp_path / "s.db", configs), sweep_id=SWEEP)
    serial, pinned = data.workloads[0].configurations
    assert (serial.precision, pinned.precision) == ("fp32", "bf16")
    assert pinned.efficiency_per_worker is not None and pinned.efficiency_per_worker > 1.0
    (note,) = [n for n in pinned.notes if n.startswith("efficiency")]
    assert "bf16 arithmetic is faster, not parallel efficiency" in note
    assert "implausible" not in note
    assert not any("efficiency above 100%" in n for n in data.notes)


def test_more_threads_in_one_worker_is_judged_per_core_not_per_worker(tmp_path):
    # One worker of 2 threads at 1.74x one core: 174% per worker, 87% per core, plausible.
    configs = [
        FixtureConfig("serial", "mnist-cnn", 1, 1, "compact", [100.0, 101.0, 99.0]),
        FixtureConfig("1 x 2 threads", "mnist-cnn", 1, 2, "compact", [174.0, 175.0, 173.0]),
    ]
    data = load_report_data(build_store(tmp_path / "s.db", configs), sweep_id=SWEEP)
    _, threaded = data.workloads[0].configurations
    assert threaded.efficiency_per_worker is not None and threaded.efficiency_per_worker > 1.7
    assert threaded.efficiency_per_core is not None and threaded.efficiency_per_core < 0.9
    assert not any("above 100%" in n for n in threaded.notes)
    assert not any("efficiency above 100%" in n for n in data.notes)


def test_a_faster_setting_on_the_baselines_own_cores_is_explained_not_flagged(tmp_path):
    # 2 pinned processes against 1 process of 2 threads, on the same 2 cores: 1.23x is the
    # same hardware used better, not parallel scaling beyond 100%.
    configs = [
        FixtureConfig("1 x 2 threads", "mnist-cnn", 1, 2, "compact", [100.0, 101.0, 99.0]),
        FixtureConfig("2 pinned workers", "mnist-cnn", 2, 1, "compact", [123.0, 124.0, 122.0]),
    ]
    data = load_report_data(build_store(tmp_path / "s.db", configs), sweep_id=SWEEP)
    base, pinned = data.workloads[0].configurations
    assert (base.cores, pinned.cores) == (2, 2)
    assert pinned.efficiency_per_core is not None and pinned.efficiency_per_core > 1.2
    assert "1.23x on the baseline's 2 core(s): the same hardware used better" in (
        " ".join(pinned.notes)
    )
    assert not any("implausible" in n for n in pinned.notes)
    assert not any("efficiency above 100%" in n for n in data.notes)


def test_a_slower_setting_on_fewer_cores_than_the_baseline_is_not_called_hardware_used_better(
    tmp_path,
):
    # Against a 2-core baseline, 1 core at 0.65x is 130% per core: the baseline's own cores
    # scaled below linear; neither "the same hardware used better" nor implausible.
    configs = [
        FixtureConfig("1 x 2 threads", "mnist-cnn", 1, 2, "compact", [100.0, 100.0]),
        FixtureConfig("serial", "mnist-cnn", 1, 1, "compact", [65.0, 65.0]),
    ]
    store = build_store(tmp_path / "s.db", configs)
    data = load_report_data(store, sweep_id=SWEEP, baseline="1 x 2 threads")
    base, serial = data.workloads[0].configurations
    assert base.is_baseline and serial.efficiency_per_core == pytest.approx(1.3)
    notes = " ".join(serial.notes)
    assert "same hardware used better" not in notes and "implausible" not in notes
    assert "fewer cores than the baseline" in notes


def test_a_clamped_one_point_fit_does_not_claim_to_reproduce_it(tmp_path):
    # Slower with 2 workers than with 1: s is clamped to 1, which predicts 1.00x, not the
    # measured 0.89x, so "one point determines s exactly" would be false.
    configs = [
        FixtureConfig("one", "mnist-cnn", 1, 1, "compact", [100.0, 100.0]),
        FixtureConfig("two", "mnist-cnn", 2, 1, "compact", [89.0, 89.0]),
    ]
    (section,) = load_report_data(build_store(tmp_path / "s.db", configs), sweep_id=SWEEP).workloads
    assert section.amdahl is not None and section.amdahl.clamped
    assert "s is clamped" in section.amdahl_note and "exactly" not in section.amdahl_note


def test_a_step_time_spread_just_above_the_threshold_does_not_read_as_it(tmp_path):
    from dataclasses import replace

    from trainscale.reporting.baseline import with_speedup

    configs = [FixtureConfig("one", "mnist-cnn", 1, 1, "compact", [100.0, 100.0])]
    (section,) = load_report_data(build_store(tmp_path / "s.db", configs), sweep_id=SWEEP).workloads
    noisy = replace(section.configurations[0], step_time_rel_iqr=0.1033)
    notes = " ".join(with_speedup(noisy, None).notes)
    assert "step-time IQR within runs is 10.3% of the median" in notes
