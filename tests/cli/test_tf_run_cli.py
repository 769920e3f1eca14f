"""`trainscale run --framework tensorflow` end to end: launched, trained, stored, shown."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("tensorflow")

from trainscale.cli import main  # noqa: E402
from trainscale.frameworks import version  # noqa: E402
from trainscale.results.store import RunStore  # noqa: E402

TF_RUN = ["run", "mnist-cnn", "--framework", "tensorflow", "--data", "synthetic", "--steps", "8"]
ANY_CORES = ["--threads-per-worker", "1", "--affinity", "none", "--allow-oversubscribe"]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No real cache, data or home directory leaks into these tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("extra", "strategy"),
    [
        ([], "MultiWorkerMirroredStrategy(ring, 2 workers)"),
        (["--single-process"], "MirroredStrategy(2 replicas on logical CPU devices, one process)"),
    ],
)
def test_two_tensorflow_workers_run_and_are_stored_with_their_framework(
    store_path, capsys, extra, strategy
):
    args = [*TF_RUN, "--workers", "2", *extra, *ANY_CORES, "--quiet", "--json"]
    assert main([*args, "--store", str(store_path)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "completed" and result["world_size"] == 2
    assert result["samples_per_s"] > 0 and result["global_batch_size"] == 128
    with RunStore(store_path) as store:
        record = store.get_run(result["run_id"])
    assert record.status == "completed"
    assert record.env["framework"]["name"] == "tensorflow"
    assert record.env["framework"]["version"] == version("tensorflow") is not None
    workers = record.summary["workers"]
    assert len(workers) == (1 if extra else 2)  # one process holds both replicas
    assert all(worker["tf_strategy"] == strategy for worker in workers)
    assert workers[0]["tf_intra_op_threads"] == (2 if extra else 1)

    assert main(["runs", "show", result["run_id"][:8], "--store", str(store_path)]) == 0
    shown = capsys.readouterr().out
    assert "completed" in shown
    assert [line.split() for line in shown.splitlines() if "framework.name" in line] == [
        ["framework.name", "tensorflow"]
    ]
    assert strategy.split("(")[0] in shown
