"""Exports of stored runs: flat JSON dicts, CSV rows, strict JSON."""

from __future__ import annotations

import csv
import io
import json

import pytest

from trainscale.results.export import (
    CSV_COLUMNS,
    export_runs,
    run_to_csv_row,
    run_to_json_dict,
)
from trainscale.results.records import RunRecord

REQUIRED_KEYS = {
    "run_id",
    "workload",
    "status",
    "error",
    "data",
    "world_size",
    "threads_per_worker",
    "affinity",
    "precision",
    "global_batch_size",
    "samples_per_s",
    "step_time_s_median",
    "step_time_s_p90",
    "epoch_time_s",
    "time_to_target_s",
    "test_accuracy",
    "test_loss",
    "tag",
    "created_at",
    "env",
}


def _record(run_id: str = "abc123", **overrides) -> RunRecord:
    fields = {
        "run_id": run_id,
        "created_at": "2025-01-02T03:04:05.000006+00:00",
        "finished_at": "2025-01-02T03:14:05.000006+00:00",
        "status": "completed",
        "error": None,
        "workload": "mnist_cnn",
        "data_kind": "real",
        "world_size": 2,
        "threads_per_worker": 1,
        "affinity": "compact",
        "precision": "fp32",
        "global_batch_size": 128,
        "tag": "sweep",
        "config": {"lr": 0.1},
        "env": {"cpu_model": "Xeon, gold", "torch_version": "2.13.0"},
        "summary": {
            "samples_per_s": 1500.0,
            "step_time_s_median": 0.08,
            "step_time_s_p90": 0.09,
            "epoch_time_s": 40.0,
            "time_to_target_s": None,
            "target_accuracy": 0.99,
            "test_accuracy": 0.985,
            "test_loss": float("nan"),
            "peak_memory_bytes_per_worker": [100, 300],
            "extra_metric": 7,
        },
        "schema_version": 1,
    }
    fields.update(overrides)
    return RunRecord(**fields)


def test_json_dict_has_required_keys_and_values() -> None:
    flat = run_to_json_dict(_record())
    assert set(flat) >= REQUIRED_KEYS
    assert flat["data"] == "real"
    assert flat["samples_per_s"] == 1500.0
    assert flat["time_to_target_s"] is None
    assert flat["extra_metric"] == 7
    assert flat["env"]["torch_version"] == "2.13.0"
    assert flat["config"] == {"lr": 0.1}
    # NaN is not JSON: exported as null.
    assert flat["test_loss"] is None


def test_json_dict_of_failed_run_without_summary() -> None:
    flat = run_to_json_dict(
        _record(status="failed", error="worker died", summary={}, data_kind=None)
    )
    assert set(flat) >= REQUIRED_KEYS
    assert flat["error"] == "worker died"
    assert flat["samples_per_s"] is None and flat["data"] is None


def test_csv_row_is_scalar() -> None:
    row = run_to_csv_row(_record())
    assert list(row) == list(CSV_COLUMNS)
    assert row["peak_memory_bytes_max"] == 300
    assert row["cpu_model"] == "Xeon, gold"
    assert row["torch_version"] == "2.13.0"
    assert all(not isinstance(value, (list, dict)) for value in row.values())


def test_export_csv_round_trip() -> None:
    records = [_record("r1"), _record("r2", tag=None, error='quote " and, comma\nnewline')]
    out = io.StringIO()
    export_runs(records, "csv", out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == 2
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert rows[0]["run_id"] == "r1"
    assert float(rows[0]["samples_per_s"]) == 1500.0
    assert rows[0]["time_to_target_s"] == ""
    assert rows[0]["cpu_model"] == "Xeon, gold"
    assert rows[1]["tag"] == ""
    assert rows[1]["error"] == 'quote " and, comma\nnewline'


def test_export_csv_empty_has_header() -> None:
    out = io.StringIO()
    export_runs([], "csv", out)
    assert out.getvalue().strip().split(",") == list(CSV_COLUMNS)


def test_export_json_with_epochs() -> None:
    epochs = {"r1": [{"epoch": 1, "train_loss": float("inf"), "test_accuracy": 0.9}]}
    out = io.StringIO()
    export_runs([_record("r1")], "json", out, epochs_of=lambda run_id: epochs[run_id])
    # Strict JSON: the standard parser must accept it without NaN/Infinity extensions.
    data = json.loads(out.getvalue(), parse_constant=lambda name: pytest.fail(name))
    assert isinstance(data, list) and len(data) == 1
    assert data[0]["run_id"] == "r1"
    assert data[0]["epochs"] == [{"epoch": 1, "train_loss": None, "test_accuracy": 0.9}]
    assert set(data[0]) >= REQUIRED_KEYS


def test_export_json_without_epochs_source() -> None:
    out = io.StringIO()
    export_runs([_record()], "json", out)
    assert "epochs" not in json.loads(out.getvalue())[0]


def test_export_unknown_format() -> None:
    with pytest.raises(ValueError, match="csv, json"):
        export_runs([], "xml", io.StringIO())


def test_exports_carry_the_contention_verdict_sweep_and_repeat_of_each_run() -> None:
    from trainscale.hardware.contention import Contention
    from trainscale.results.export import CONTENTION_COLUMNS, CONTENTION_FIELDS

    assert set(CONTENTION_FIELDS) <= set(Contention.__dataclass_fields__)  # typed fields
    busy = Contention(
        verdict="busy",
        reason="other processes used 0.90 cores",
        other_cores_busy_run_cores=0.9,
        other_cores_busy=1.1,
        steal_fraction=0.0,
    )
    record = _record(
        summary={"samples_per_s": 10.0, **busy.summary()},
        sweep_id="5eed",
        config_hash="c0ffee",
        repeat_index=2,
    )
    row = run_to_csv_row(record)
    assert set(CONTENTION_COLUMNS) | {"sweep_id", "config_hash", "repeat_index"} <= set(CSV_COLUMNS)
    assert (row["sweep_id"], row["config_hash"], row["repeat_index"]) == ("5eed", "c0ffee", 2)
    assert row["contention_verdict"] == "busy"
    assert row["contention_other_cores_busy_run_cores"] == 0.9
    assert row["contention_reason"] == "other processes used 0.90 cores"
    out = io.StringIO()
    export_runs([record, _record("old")], "csv", out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [r["contention_verdict"] for r in rows] == ["busy", ""]  # none stored: empty
    assert [r["repeat_index"] for r in rows] == ["2", ""]
    flat = run_to_json_dict(record)
    assert flat["contention_verdict"] == "busy" and flat["repeat_index"] == 2
    assert run_to_json_dict(_record("old"))["contention_verdict"] is None


def test_finite_or_none_nulls_every_figure_json_cannot_hold_wherever_it_is():
    from trainscale.results.export import finite_or_none

    nested = {"a": float("nan"), "b": [1.0, float("inf")], "c": (2.0, float("-inf")), "d": "x"}
    assert finite_or_none(nested) == {"a": None, "b": [1.0, None], "c": [2.0, None], "d": "x"}
