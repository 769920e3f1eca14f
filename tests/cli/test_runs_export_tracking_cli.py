"""`trainscale runs export --format mlflow|tensorboard` through the real entry point: a missing
extra, a bad destination or a misplaced flag is one line and exit 2 before anything is
written; the happy path prints one progress line per run."""

from __future__ import annotations

import importlib.util
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.tracking_store import FAILED_ID, REAL_ID, SYNTHETIC_ID, build_tracking_store


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # MLflow's default store and artifacts land in the cwd
    return build_tracking_store(tmp_path / "runs.db")


def _written(tmp_path: Path) -> set[str]:
    """What is in tmp_path besides the results store."""
    return {p.name for p in tmp_path.iterdir() if not p.name.startswith("runs.db")}


@pytest.mark.parametrize(
    ("tool", "module", "args"),
    [
        ("mlflow", "mlflow", ["--tracking-uri", "sqlite:///ml.db"]),
        ("mlflow", "sqlalchemy", []),
        ("tensorboard", "tensorboard", ["--out", "logs"]),
    ],
)
def test_a_missing_extra_is_one_line_naming_it_and_nothing_is_written(
    store, tmp_path, capsys, monkeypatch, tool, module, args
):
    monkeypatch.setitem(sys.modules, module, None)  # what an uninstalled module looks like
    code = run_cli(["runs", "export", "--format", tool, "--store", str(store), *args])
    assert code == 2
    line = one_error_line(capsys)
    assert line.startswith("trainscale: error: ") and module in line
    assert line.endswith(f"pip install 'trainscale[{tool}]'")
    assert _written(tmp_path) == set()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--format", "mlflow", "--tracking-uri", "nosuch://x"], "nosuch://x"),
        (["--format", "mlflow", "--tracking-uri", "sqlite:///runs.db"], "not an MLflow store"),
        (["--format", "tensorboard", "--out", "runs.db"], "not a directory"),
        (["--format", "tensorboard"], "needs --out LOGDIR"),
        (["--format", "mlflow", "--out", "x"], "not --out"),
        (["--format", "csv", "--experiment", "e"], "--experiment: for --format mlflow only"),
        (["--format", "json", "--run", REAL_ID[:4], "--status", "failed"], "not both"),
        (["--format", "tensorboard", "--out", "logs", "--run", "zzz"], "no run 'zzz'"),
        # In-memory stores: MLflow takes them, and the export is gone when the command ends.
        (["--format", "mlflow", "--tracking-uri", "sqlite://"], "in-memory database"),
        (["--format", "mlflow", "--tracking-uri", "sqlite:///:memory:"], "in-memory database"),
        # Empty values: the default experiment, or '.', silently.
        (["--format", "mlflow", "--experiment", ""], "argument --experiment: is empty"),
        (["--format", "json", "--out", ""], "argument --out: is empty"),
        (["--format", "tensorboard", "--out", " "], "argument --out: is empty"),
    ],
)
def test_a_bad_destination_or_flag_is_one_line_before_anything_is_written(
    store, tmp_path, capsys, args, words
):
    if "mlflow" in args:
        pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    if "tensorboard" in args:
        pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    before = store.read_bytes()
    assert run_cli(["runs", "export", "--store", str(store), *args]) == 2
    assert words in one_error_line(capsys)
    assert _written(tmp_path) == set()
    assert store.read_bytes() == before


def test_an_in_memory_tracking_store_from_the_environment_is_refused(
    store, tmp_path, capsys, monkeypatch
):
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite://")
    assert run_cli(["runs", "export", "--store", str(store), "--format", "mlflow"]) == 2
    assert "MLflow tracking store sqlite:// is an in-memory database" in one_error_line(capsys)
    assert _written(tmp_path) == set()


def test_mlflow_export_prints_a_line_per_run_and_skips_them_the_second_time(
    store, tmp_path, capsys
):
    mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    args = ["runs", "export", "--format", "mlflow", "--store", str(store),
            "--tracking-uri", "sqlite:///ml.db", "--experiment", "study"]  # fmt: skip
    assert run_cli(args) == 0
    first = capsys.readouterr()
    lines = first.err.splitlines()
    assert len(lines) == 3 and all(line.startswith("mlflow: ") for line in lines)
    assert any(line.startswith(f"mlflow: {FAILED_ID[:8]} mnist-cnn 4x1") for line in lines)
    assert "(failed): created MLflow run " in " ".join(lines)
    assert "exported 3 runs to MLflow experiment 'study' at sqlite:///ml.db" in first.out
    assert run_cli([*args, "--run", REAL_ID[:6]]) == 0
    second = capsys.readouterr()
    assert [line.split(":")[2].split()[0] for line in second.err.splitlines()] == ["skipped"]
    client = mlflow.MlflowClient("sqlite:///ml.db")
    experiment = client.get_experiment_by_name("study")
    assert len(client.search_runs([experiment.experiment_id])) == 3


def test_tensorboard_export_writes_a_directory_per_selected_run(store, tmp_path, capsys):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    args = ["runs", "export", "--format", "tensorboard", "--out", "logs", "--store", str(store),
            "--run", SYNTHETIC_ID[:5], "--run", FAILED_ID]  # fmt: skip
    assert run_cli(args) == 0
    out, err = capsys.readouterr()
    assert [line.split()[1] for line in err.splitlines()] == [SYNTHETIC_ID[:8], FAILED_ID[:8]]
    assert "tensorboard --logdir logs" in out
    names = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert names == [
        "mnist-cnn_4x1_b64_fp32_c3c3c3c3",
        "tweets-text_1x1_b64_fp32_synthetic_b2b2b2b2",
    ]


def test_json_export_selects_runs_by_id(store, capsys):
    import json

    args = ["runs", "export", "--format", "json", "--store", str(store), "--run", FAILED_ID[:3]]
    assert run_cli(args) == 0
    assert [run["run_id"] for run in json.loads(capsys.readouterr().out)] == [FAILED_ID]


def test_an_mlflow_store_failing_part_way_is_one_line_after_the_runs_it_exported(
    store, capsys, monkeypatch
):
    import errno

    mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    logged = mlflow.MlflowClient.log_artifacts
    calls = []

    def full_on_the_second_run(self, *args, **kwargs):  # a disk that fills up meanwhile
        calls.append(args)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return logged(self, *args, **kwargs)

    monkeypatch.setattr(mlflow.MlflowClient, "log_artifacts", full_on_the_second_run)
    args = ["runs", "export", "--format", "mlflow", "--store", str(store),
            "--tracking-uri", "sqlite:///ml.db"]  # fmt: skip
    assert run_cli(args) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err and out == ""
    progress, error = err.splitlines()
    assert progress.startswith("mlflow: ") and ": created MLflow run " in progress
    assert error.startswith("trainscale: error: MLflow export to sqlite:///ml.db stopped at run ")
    assert "(1 of 3 runs exported before it;" in error
    assert error.endswith("No space left on device")


def test_a_database_uri_without_its_driver_is_one_line(store, capsys):
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    if any(importlib.util.find_spec(name) for name in ("psycopg", "psycopg2")):
        pytest.skip("a PostgreSQL driver is installed")
    args = ["runs", "export", "--format", "mlflow", "--store", str(store),
            "--tracking-uri", "postgresql://user:s3cret@127.0.0.1:1/db"]  # fmt: skip
    assert run_cli(args) == 2
    line = one_error_line(capsys)
    assert "its database driver is not installed" in line
    # The password never reaches the terminal (or a CI log).
    assert "s3cret" not in line and "postgresql://user:***@127.0.0.1:1/db" in line


def test_an_unreachable_tracking_server_is_one_line_within_the_bound(store, capsys, monkeypatch):
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    from trainscale.reporting.mlflow_export import HTTP_SETTINGS, HTTP_WAIT_BOUND_S

    for name in HTTP_SETTINGS:  # MLflow's own settings would retry for about four minutes
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{closed.getsockname()[1]}"
        started = time.monotonic()
        code = run_cli(["runs", "export", "--format", "mlflow", "--store", str(store),
                        "--tracking-uri", uri])  # fmt: skip
        took = time.monotonic() - started
    assert code == 2 and took < HTTP_WAIT_BOUND_S
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith(
        f"trainscale: error: cannot use the MLflow tracking store {uri}: "
    )
