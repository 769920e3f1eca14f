"""Stored runs exported to a real local MLflow store (SQLite) and read back with MLflow's
own client: params, tags, metric histories, artifacts, and no duplicate on a second export."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from trainscale.errors import ConfigError
from trainscale.reporting.mlflow_export import (
    HTTP_SETTINGS,
    HTTP_WAIT_BOUND_S,
    TRUNCATED,
    ExportFailed,
    bounded_http,
    export_mlflow,
)
from trainscale.reporting.tracking import load_runs
from trainscale.results.store import RunStore

from tests.helpers.tracking_store import (
    EPOCHS,
    FAILED_ID,
    FAILURE,
    LONG_VALUE,
    REAL,
    REAL_ID,
    STEP_TIMES,
    SYNTHETIC,
    SYNTHETIC_ID,
    build_tracking_store,
    create,
)

mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
pytest.importorskip("sqlalchemy", reason="the mlflow extra is not installed")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # MLflow puts a SQLite store's artifacts in ./mlruns: keep them in tmp_path.
    monkeypatch.chdir(tmp_path)
    return build_tracking_store(tmp_path / "runs.db")


def _uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def _by_trainscale_id(client, experiment: str = "trainscale") -> dict:
    found = client.get_experiment_by_name(experiment)
    runs = client.search_runs([found.experiment_id])
    by_id: dict = {}
    for run in runs:
        by_id.setdefault(run.data.tags["trainscale.run_id"], []).append(run)
    return by_id


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run_id, key)]


def _artifact(client, run_id: str, path: str, tmp_path: Path) -> Path:
    (tmp_path / "dl").mkdir(exist_ok=True)
    return Path(client.download_artifacts(run_id, path, str(tmp_path / "dl")))


def test_a_completed_run_becomes_one_mlflow_run_with_its_config_series_and_report(
    store: Path, tmp_path: Path
) -> None:
    done = export_mlflow(load_runs(store, run_ids=[REAL_ID]), tracking_uri=_uri(tmp_path))
    assert [(d.run_id, d.action) for d in done] == [(REAL_ID, "created")]
    client = mlflow.MlflowClient(_uri(tmp_path))
    [run] = _by_trainscale_id(client)[REAL_ID]
    mlflow_id = run.info.run_id
    assert done[0].target == f"MLflow run {mlflow_id}"
    assert run.info.status == "FINISHED"

    # params: the resolved config, each value as text (JSON where it is no string)
    config = REAL.config()
    expected = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    long = run.data.params.pop("data_dir")
    expected.pop("data_dir")
    assert run.data.params == expected
    assert long.endswith(TRUNCATED) and len(long) == 6000
    assert LONG_VALUE.startswith(long.removesuffix(TRUNCATED))

    tags = run.data.tags
    assert tags["trainscale.status"] == "completed"
    assert tags["trainscale.workload"] == "mnist-cnn"
    assert tags["trainscale.host"] == "fixture-host"
    assert "trainscale.failure_reason" not in tags

    # one value per stored step, steps numbered as stored (from 0), values as stored
    assert _history(client, mlflow_id, "step_time_s") == list(enumerate(STEP_TIMES))
    for field in ("train_loss", "test_accuracy", "epoch_time_s"):
        assert _history(client, mlflow_id, f"epoch/{field}") == [
            (row["epoch"], row[field]) for row in EPOCHS
        ]
    # an epoch without a value has no point (eval_time_s of epoch 2 is None)
    assert _history(client, mlflow_id, "epoch/eval_time_s") == [(1, 0.05)]
    with RunStore(store) as runs:
        stored = runs.get_run(REAL_ID).summary
    for key in ("samples_per_s", "time_to_target_s", "test_accuracy", "step_time_s_median"):
        assert run.data.metrics[key] == pytest.approx(stored[key])

    exported = json.loads(_artifact(client, mlflow_id, "trainscale/run.json", tmp_path).read_text())
    assert exported[0]["run_id"] == REAL_ID and exported[0]["config"]["data_dir"] == LONG_VALUE
    assert len(exported[0]["epochs"]) == 2
    report = _artifact(client, mlflow_id, "trainscale/report", tmp_path)
    assert "mnist-cnn" in (report / "report.md").read_text()
    assert (report / "report.html").stat().st_size > 0
    assert list(report.glob("*.png"))


def test_a_failed_run_is_tagged_failed_with_its_reason(store: Path, tmp_path: Path) -> None:
    export_mlflow(load_runs(store, run_ids=[FAILED_ID]), tracking_uri=_uri(tmp_path))
    client = mlflow.MlflowClient(_uri(tmp_path))
    [run] = _by_trainscale_id(client)[FAILED_ID]
    assert run.info.status == "FAILED"
    assert run.data.tags["trainscale.failure_reason"] == FAILURE
    assert run.data.tags["trainscale.status"] == "failed"
    assert client.get_metric_history(run.info.run_id, "step_time_s") == []
    names = {a.path for a in client.list_artifacts(run.info.run_id, "trainscale")}
    assert names == {"trainscale/run.json"}  # no report: the run never completed


def test_a_synthetic_run_claims_no_loss_or_accuracy(store: Path, tmp_path: Path) -> None:
    export_mlflow(load_runs(store, run_ids=[SYNTHETIC_ID]), tracking_uri=_uri(tmp_path))
    client = mlflow.MlflowClient(_uri(tmp_path))
    [run] = _by_trainscale_id(client)[SYNTHETIC_ID]
    metrics = run.data.metrics
    assert "samples_per_s" in metrics and "epoch/epoch_time_s" in metrics
    for key in ("test_accuracy", "time_to_target_s", "epoch/test_accuracy", "epoch/train_loss"):
        assert key not in metrics
    assert run.data.tags["trainscale.data"] == "synthetic"
    assert run.data.params["workload"] == SYNTHETIC.workload


def test_exporting_twice_makes_no_duplicate(store: Path, tmp_path: Path) -> None:
    runs = load_runs(store)
    first = export_mlflow(runs, tracking_uri=_uri(tmp_path), experiment="e")
    second = export_mlflow(runs, tracking_uri=_uri(tmp_path), experiment="e")
    assert {d.action for d in first} == {"created"}
    assert {d.action for d in second} == {"skipped"}
    assert [d.target for d in second] == [d.target for d in first]
    by_id = _by_trainscale_id(mlflow.MlflowClient(_uri(tmp_path)), "e")
    assert sorted(by_id) == sorted([REAL_ID, SYNTHETIC_ID, FAILED_ID])
    assert all(len(found) == 1 for found in by_id.values())


def test_a_run_exported_while_running_is_replaced_once_it_completed(
    store: Path, tmp_path: Path
) -> None:
    run_id = "d4d4d4d4" + "0" * 24
    with RunStore(store) as runs:
        create(runs, run_id, REAL)
    [before] = export_mlflow(load_runs(store, run_ids=[run_id]), tracking_uri=_uri(tmp_path))
    with RunStore(store) as runs:
        runs.complete_run(run_id, {"samples_per_s": 10.0}, [], [0.5, 0.25])
    [after] = export_mlflow(load_runs(store, run_ids=[run_id]), tracking_uri=_uri(tmp_path))
    assert (before.action, after.action) == ("created", "replaced")
    client = mlflow.MlflowClient(_uri(tmp_path))
    [run] = _by_trainscale_id(client)[run_id]  # the earlier export is deleted
    assert run.info.status == "FINISHED" and run.data.metrics["samples_per_s"] == 10.0
    assert _history(client, run.info.run_id, "step_time_s") == [(0, 0.5), (1, 0.25)]


def test_an_export_cut_short_is_replaced(store: Path, tmp_path: Path) -> None:
    client = mlflow.MlflowClient(_uri(tmp_path))
    experiment = client.create_experiment("trainscale")
    partial = client.create_run(experiment, tags={"trainscale.run_id": REAL_ID})
    client.log_metric(partial.info.run_id, "step_time_s", 9.0, step=0)
    [done] = export_mlflow(load_runs(store, run_ids=[REAL_ID]), tracking_uri=_uri(tmp_path))
    assert done.action == "replaced"
    [run] = _by_trainscale_id(client)[REAL_ID]
    assert run.info.run_id != partial.info.run_id
    assert _history(client, run.info.run_id, "step_time_s") == list(enumerate(STEP_TIMES))


@pytest.mark.parametrize("uri", ["nosuch://x", "sqlite:///{store}"])
def test_a_tracking_store_that_cannot_be_used_is_one_config_error(
    store: Path, tmp_path: Path, uri: str
) -> None:
    before = store.read_bytes()
    with pytest.raises(ConfigError) as error:
        export_mlflow(load_runs(store), tracking_uri=uri.format(store=store))
    assert "\n" not in str(error.value)
    # The trainscale store itself is refused before MLflow could add its tables to it.
    assert store.read_bytes() == before
    assert not (tmp_path / "mlruns").exists()


def test_a_full_disk_part_way_is_one_line_saying_what_was_exported(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logged = mlflow.MlflowClient.log_artifacts
    calls: list[str] = []

    def full_on_the_second_run(self, run_id, *args, **kwargs):
        calls.append(run_id)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return logged(self, run_id, *args, **kwargs)

    monkeypatch.setattr(mlflow.MlflowClient, "log_artifacts", full_on_the_second_run)
    with pytest.raises(ExportFailed) as failure:
        export_mlflow(load_runs(store), tracking_uri=_uri(tmp_path))
    message = str(failure.value)
    assert "\n" not in message and message.endswith("No space left on device")
    assert "1 of 3 runs exported before it" in message
    assert [done.action for done in failure.value.done] == ["created"]
    # The run it stopped at is not left half-logged.
    client = mlflow.MlflowClient(_uri(tmp_path))
    assert sum(len(runs) for runs in _by_trainscale_id(client).values()) == 1


def test_a_run_deleted_by_another_export_meanwhile_is_one_line(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logged = mlflow.MlflowClient.log_batch

    def deleted_meanwhile(self, run_id, *args, **kwargs):
        mlflow.MlflowClient(_uri(tmp_path)).delete_run(run_id)  # what the other export does
        return logged(self, run_id, *args, **kwargs)

    monkeypatch.setattr(mlflow.MlflowClient, "log_batch", deleted_meanwhile)
    with pytest.raises(ExportFailed) as failure:
        export_mlflow(load_runs(store), tracking_uri=_uri(tmp_path))
    message = str(failure.value)
    assert "\n" not in message and "no run exported" in message
    assert "deleted" in message and failure.value.done == []


def test_mlflow_http_waits_are_bounded_unless_the_user_set_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlflow.environment_variables import (
        MLFLOW_HTTP_REQUEST_MAX_RETRIES,
        MLFLOW_HTTP_REQUEST_TIMEOUT,
    )

    for name in HTTP_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")
    with bounded_http():  # what MLflow reads at each request
        assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 2
        assert MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 60
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ
    # 3 tries of 10 s, the back-offs (0 and 2 s, with up to 1 s of jitter each in urllib3
    # and again in MLflow's retry) within the bound.
    setting = {name.removeprefix("MLFLOW_HTTP_REQUEST_"): int(value)
               for name, value in HTTP_SETTINGS.items()}  # fmt: skip
    retries, factor, timeout = setting["MAX_RETRIES"], setting["BACKOFF_FACTOR"], setting["TIMEOUT"]
    backoff = sum(factor * 2**n + 2 for n in range(1, retries)) + 1
    assert (retries + 1) * timeout + backoff <= HTTP_WAIT_BOUND_S
