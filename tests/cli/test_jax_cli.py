"""`trainscale run --framework jax` end to end: worker processes and one process with host
devices, stored completed with the framework in the run's environment."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("jax")

from trainscale.results.store import RunStore  # noqa: E402

from tests.helpers.cli import one_error_line, run_cli  # noqa: E402

TWIN_WORKLOAD = f"{Path(__file__).parents[1] / 'helpers' / 'flax_twin_workload.py'}:make_workload"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No real cache, data or home directory leaks into these tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("extra", "distribution", "threads"),
    [
        ([], "jax.distributed, 2 processes, gloo", 1),
        (["--single-process"], "one process, 2 host devices", 2),
    ],
    ids=["processes", "single-process"],
)
def test_jax_run_of_two_workers_is_stored_completed(
    store_path, capsys, extra, distribution, threads
):
    args = ["run", "mnist-cnn", "--framework", "jax", "--data", "synthetic", "--steps", "8"]
    args += ["--workers", "2", "--threads-per-worker", "1", "--batch-size", "16", *extra]

    code = run_cli([*args, "--store", str(store_path), "--json", "--quiet"])

    # stdout is the JSON alone: gloo's connection lines from the workers go elsewhere.
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert result["status"] == "completed"
    assert result["num_steps"] == 8 and result["global_batch_size"] == 32
    assert result["compile_time_s"] > 0
    with RunStore(store_path) as store:
        record = store.get_run(result["run_id"])
    assert record.status == "completed"
    assert record.env["framework"]["name"] == "jax"
    assert record.env["framework"]["version"]
    assert record.config["framework"] == "jax"
    workers = result["workers"]
    assert len(workers) == (1 if extra else 2)
    for worker in workers:
        assert worker["jax_distribution"].startswith(distribution)
        assert worker["jax_threads"] == threads


@pytest.mark.parametrize("fault", ["crash", "hang"])
def test_failing_jax_worker_ends_the_run_and_is_stored_failed(
    fault, store_path, capsys, monkeypatch
):
    monkeypatch.setenv("TRAINSCALE_FAULT_INJECT", f"{fault}:rank=1:step=2")
    args = ["run", "mnist-cnn", "--framework", "jax", "--data", "synthetic", "--steps", "6"]
    args += ["--workers", "2", "--threads-per-worker", "1", "--batch-size", "16"]
    start = time.monotonic()

    # A peer that stops answering fails the run after --timeout (the JAX collectives' too).
    code = run_cli([*args, "--timeout", "15", "--store", str(store_path), "--quiet"])

    elapsed = time.monotonic() - start
    assert code == 1
    assert "failed" in capsys.readouterr().err.splitlines()[-1]
    assert elapsed < 120, "a failed or hung JAX worker must not hang the run"
    with RunStore(store_path) as store:
        (record,) = store.list_runs()
    assert record.status == "failed"
    assert ("injected crash" if fault == "crash" else "Timed out") in record.error


def test_a_users_workload_trains_in_jax_through_the_twin_it_names(store_path, capsys):
    args = ["run", TWIN_WORKLOAD, "--framework", "jax", "--steps", "6", "--batch-size", "32"]
    code = run_cli([*args, "--store", str(store_path), "--json", "--quiet"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "completed" and result["num_steps"] == 6
    with RunStore(store_path) as store:
        record = store.get_run(result["run_id"])
    assert record.config["framework"] == "jax" and record.workload == "flax-twin-mlp"

    args = ["run", TWIN_WORKLOAD, "--framework", "tensorflow", "--store", str(store_path)]
    assert run_cli(args) == 2
    assert one_error_line(capsys) == (
        "trainscale: error: workload 'flax-twin-mlp' has no tensorflow model, only jax, "
        "pytorch (docs/frameworks.md)"
    )
