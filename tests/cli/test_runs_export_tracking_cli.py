"""`trainscale runs export --format mlflow|tensorboard` through the real entry point: a missing
extra, a bad destination or a misplaced flag is one line and exit 2 before anything is
written; the happy path prints one progress line per run."""

from __future__ import annotations

import sys
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
