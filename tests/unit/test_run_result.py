"""The typed result: one place makes the stored summary, exports take their columns from it."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from trainscale.hardware.contention import Contention
from trainscale.hardware.facts import Environment
from trainscale.hardware.figures import HardwareFigures
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.results.export import CSV_COLUMNS, SUMMARY_KEYS, run_to_csv_row
from trainscale.results.run_result import EmulationMetrics, RunMetrics, RunResult
from trainscale.results.store import RunStore
from trainscale.runner.record import create_run_row, store_outcome
from trainscale.train.trainer import train

from tests.helpers.tiny import tiny_config, tiny_data, tiny_workload

# The keys a completed run's summary has carried since schema 3 (readers depend on them),
# and the mean step beside the median since schema 5.
STORED_KEYS = {
    "samples_per_s", "samples_per_s_per_worker", "step_time_s_median", "step_time_s_p90",
    "step_time_s_iqr", "num_timed_steps", "warmup_steps_excluded", "epoch_time_s",
    "time_to_target_s", "target_accuracy", "test_accuracy", "test_loss", "test_macro_f1",
    "accuracy_curve", "train_time_s", "eval_time_s", "num_steps", "num_samples",
    "peak_memory_bytes_per_worker", "peak_gpu_memory_bytes_per_worker", "flops_per_sample",
    "flops_per_sample_by_kind",
    "pretrain_time_s", "supervised_time_s", "compile_time_s", "device_warmup_s", "breakdown_s",
    "breakdown_sampled_steps", "step_time_s_mean", "samples_per_s_mean", "workers",
    "data_source", "energy_j", "hardware",
    "achieved_tflops", "mfu_peak", "mfu", "mfu_vs_probe", "mfu_probe_peak",
    "contention",  # rank 0 writes 'unknown'; the launching process adds what it sampled
    "planned_steps", "stopped_at_target",  # --stop-at-target
    "unequal_steps",  # texts of unequal length: throughput over the mean step
}  # fmt: skip


@pytest.fixture(scope="module")
def outcome():
    config = tiny_config(steps=6)
    return config, train(config, tiny_workload(), tiny_data(), make_strategy(config, DistEnv()))


def test_a_stored_run_summary_is_made_from_its_typed_result(outcome, tmp_path: Path) -> None:
    config, trained = outcome
    with RunStore(tmp_path / "s.db") as store:
        create_run_row(store, "r1", config)
        result = store_outcome(store, "r1", config, trained, "tests: tiny", {"cpu_j": 1.0})
        stored = store.get_run("r1").summary
    assert set(stored) == STORED_KEYS
    assert stored == result.summary()
    assert stored["samples_per_s"] == trained.metrics.samples_per_s
    assert stored["energy_j"] == {"cpu_j": 1.0} and stored["data_source"] == "tests: tiny"
    # No launching process sampled this run: the verdict says so rather than guessing.
    assert stored["contention"]["verdict"] == "unknown"
    assert "launched the workers recorded no contention" in stored["contention"]["reason"]


def test_an_emulation_summary_has_no_hardware_or_step_figures() -> None:
    metrics = EmulationMetrics(
        target_accuracy=0.9,
        train_time_s=1.0,
        eval_time_s=0.5,
        num_steps=4,
        num_samples=64,
        emulation={"mode": "sync", "workers": 2},
    )
    summary = RunResult(metrics=metrics, workers=[{"rank": 0}], data_source="x").summary()
    assert summary["emulation"] == {"mode": "sync", "workers": 2}
    assert not {"samples_per_s", "mfu", "hardware", "energy_j"} & set(summary)


def test_export_columns_are_fields_of_the_typed_result() -> None:
    typed = (
        {f.name for f in fields(RunMetrics)}
        | {f.name for f in fields(HardwareFigures)}
        | {f.name for f in fields(Environment)}
    )
    run_columns = {
        "run_id", "created_at", "finished_at", "workload", "status", "data", "world_size",
        "threads_per_worker", "affinity", "precision", "global_batch_size", "tag", "error",
        "peak_memory_bytes_max",  # derived: the largest of the per-worker figures
        "sweep_id", "config_hash", "repeat_index",
        "framework", "framework_version", "single_process",  # the run's settings, read typed
    }  # fmt: skip
    # The contention columns are `Contention` fields, each prefixed.
    contention = {f"contention_{f.name}" for f in fields(Contention)}
    assert set(CSV_COLUMNS) - run_columns <= typed | contention
    assert set(SUMMARY_KEYS) == {f.name for f in fields(RunMetrics)}
    assert {"mfu", "flops_per_sample", "cpu_model", "torch_version"} <= set(CSV_COLUMNS)
    # One number a cell: lists and tables stay in the JSON export.
    assert not {"peak_memory_bytes_per_worker", "accuracy_curve", "breakdown_s"} & set(CSV_COLUMNS)
    assert CSV_COLUMNS.index("samples_per_s") < CSV_COLUMNS.index("test_accuracy")


def test_a_csv_row_reads_the_environment_by_its_fields(outcome, tmp_path: Path) -> None:
    config, trained = outcome
    with RunStore(tmp_path / "s.db") as store:
        create_run_row(store, "r1", config)
        store_outcome(store, "r1", config, trained, "tests: tiny", None)
        record = store.get_run("r1")
    row = run_to_csv_row(record)
    assert row["cpu_model"] == record.env["cpu_model"] == record.machine.cpu_model
    assert row["torch_version"] == record.env["torch_version"]
    assert row["flops_per_sample"] == trained.metrics.flops_per_sample
