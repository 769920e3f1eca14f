"""`trainscale recommend`: output and mistakes with stubbed trials, and one tiny real search."""

from __future__ import annotations

import json

import pytest

from trainscale.cli import main
from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, parse_run_command, run_cli
from tests.helpers.mnist_files import write_random_mnist


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No real cache, data or home directory leaks into these tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def tiny_mnist(tmp_path):
    """Four IDX files of a few hundred random digits: enough for a real accuracy run."""
    return write_random_mnist(tmp_path / "mnist", 256, 64)


class StubRuns:
    """Stands in for execute_run: throughput grows with the cores, workers and batch; global
    batches above 128 lose accuracy."""

    def __init__(self) -> None:
        self.calls = []

    def __call__(self, options, store_path=None, quiet=False, **_):
        self.calls.append(options)
        cores = options.parallel.workers * options.parallel.threads_per_worker
        rate = 1000.0 * cores**0.8 * (1.1 if options.optimisation.batch_size > 64 else 1.0)
        rate *= (
            1.0 + 0.05 * options.parallel.workers
        )  # processes scale a little better than threads
        global_batch = options.parallel.workers * options.optimisation.batch_size
        accuracy = None
        if options.measurement.evaluate:
            accuracy = 0.95 if global_batch > 128 else 0.98
        steps = options.optimisation.steps or 10
        return {
            "run_id": f"{len(self.calls):08d}stub",
            "samples_per_s": rate,
            "train_time_s": steps * global_batch / rate,
            "num_samples": steps * global_batch,
            "test_accuracy": accuracy,
        }


def test_prints_best_speedup_rejections_and_command(tiny_mnist, tmp_path, monkeypatch, capsys):
    stub = StubRuns()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", stub)
    code = main(
        ["recommend", "mnist-cnn", "--data-dir", str(tiny_mnist), "--store", str(tmp_path / "r.db")]
    )
    assert code == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "best: " in out and "speedup" in out
    assert "accuracy check" in out
    command = out.strip().splitlines()[-1].strip()
    assert command.startswith("trainscale run mnist-cnn --data-dir ")
    options = parse_run_command(command)
    assert (
        options.parallel.workers >= 1
        and options.optimisation.precision == "fp32"
        and options.optimisation.steps is None
    )
    assert "rung 0" in captured.err  # progress on stderr
    # Every trial came with the recommend tag; accuracy runs on the data found.
    tags = {o.tag for o in stub.calls}
    assert len(tags) == 1 and next(iter(tags)).startswith("recommend:")
    accuracy_runs = [o for o in stub.calls if o.measurement.evaluate]
    assert accuracy_runs and all(o.data.kind == "real" for o in accuracy_runs)
    assert all(o.data.kind == "synthetic" for o in stub.calls if not o.measurement.evaluate)


def test_json_lists_rejections_and_round_trips_the_command(
    tiny_mnist, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr("trainscale.runner.launch.execute_run", StubRuns())
    from trainscale.hardware.facts import collect_environment

    # A 4-core machine: more candidates than this one may have, and larger global batches.
    four_cores = {**collect_environment(), "usable_cores": [0, 1, 2, 3], "numa_nodes": []}
    monkeypatch.setattr("trainscale.hardware.facts.collect_environment", lambda *a, **k: four_cores)
    code = main(
        [
            "recommend",
            "mnist-cnn",
            "--data-dir",
            str(tiny_mnist),
            "--store",
            str(tmp_path / "r.db"),
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("best", "speedup", "command", "rejected", "ranking", "space", "notes", "tag"):
        assert key in data
    assert data["accuracy_checked"] is True
    assert data["best"]["global_batch_size"] <= 128  # the larger ones lost accuracy
    assert data["rejected"] and all("points below" in r["reason"] for r in data["rejected"])
    assert data["speedup"] > 1.0
    options = parse_run_command(data["command"])
    assert options.parallel.workers == data["best"]["workers"]
    assert options.optimisation.batch_size == data["best"]["batch_size"]


def test_missing_real_data_skips_the_accuracy_check_loudly(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("trainscale.runner.launch.execute_run", StubRuns())
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    code = main(
        ["recommend", "mnist-cnn", "--no-download", "--store", str(tmp_path / "r.db"), "--json"]
    )
    assert code == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["accuracy_checked"] is False
    assert "REAL DATA NOT FOUND" in captured.err and "REAL DATA NOT FOUND" in data["data_note"]


def test_candidates_whose_shards_cannot_hold_their_batch_are_left_out(
    tiny_mnist, tmp_path, monkeypatch, capsys
):
    stub = StubRuns()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", stub)
    from trainscale.hardware.facts import collect_environment

    four_cores = {**collect_environment(), "usable_cores": [0, 1, 2, 3], "numa_nodes": []}
    monkeypatch.setattr("trainscale.hardware.facts.collect_environment", lambda *a, **k: four_cores)
    args = ["recommend", "mnist-cnn", "--data-dir", str(tiny_mnist), "--json"]
    assert main([*args, "--store", str(tmp_path / "r.db")]) == 0
    skipped = json.loads(capsys.readouterr().out)["space"]["skipped"]
    # 256 real training samples over 4 workers is 64 each: a per-worker batch of 128 does
    # not fit the accuracy check, so that setting is never tried.
    assert any(
        line.startswith("4w x 1t compact fp32 b128 skipped") and "64 of 256 samples" in line
        for line in skipped
    )
    assert not any(o.parallel.workers == 4 and o.optimisation.batch_size == 128 for o in stub.calls)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["recommend", "no-such-workload"], "no-such-workload"),
        (["recommend", "mnist-cnn", "--rung-steps", "10,x"], "--rung-steps"),
        (["recommend", "mnist-cnn", "--rung-steps", "10,5"], "--rung-steps must grow"),
        (["recommend", "mnist-cnn", "--rung-steps", "10,10"], "--rung-steps must grow"),
        (["recommend", "mnist-cnn", "--budget-s", "0", "--data", "synthetic"], "--budget-s"),
        (["recommend", "mnist-cnn", "--accuracy-tolerance", "150"], "--accuracy-tolerance"),
        (["recommend", "mnist-cnn", "--store", "/no/such/dir/r.db"], "/no/such/dir"),
        (
            ["recommend", "mnist-cnn", "--data", "real", "--no-download", "--data-dir", "nowhere"],
            "nowhere",
        ),
        # 64 x 1000 per worker is more than the 60,000 synthetic trial samples.
        (
            ["recommend", "mnist-cnn", "--data", "synthetic", "--batch-multipliers", "1,1000"],
            "--batch-multipliers",
        ),
        (["recommend", "mnist-cnn", "--accuracy-epochs", "0"], "accuracy epochs must be positive"),
    ],
)
def test_mistakes_cost_one_line(args, fragment, monkeypatch, capsys):
    stub = StubRuns()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", stub)
    assert run_cli(args) == 2
    assert fragment in one_error_line(capsys)
    assert not stub.calls  # nothing ran


def test_tiny_real_search_end_to_end(tiny_mnist, tmp_path, capsys):
    """Real trial runs (two settings, one short rung) and a real accuracy check."""
    store = tmp_path / "r.db"
    code = main(
        [
            "recommend",
            "mnist-cnn",
            "--quick",
            "--max-workers",
            "1",
            "--batch-multipliers",
            "1",
            "--rung-steps",
            "2",
            "--warmup-steps",
            "1",
            "--accuracy-epochs",
            "0.5",
            "--data-dir",
            str(tiny_mnist),
            "--store",
            str(store),
            "--json",
            # Real trials on a shared test machine may well be busy: this test is about the
            # search end to end, not about leaving busy trials out (test_recommend.py is).
            "--include-busy",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["accuracy_checked"] and data["baseline_accuracy"] is not None
    assert data["speedup"] is not None
    with RunStore(store) as runs:
        stored = runs.list_runs(tag=data["tag"])
    assert len(stored) == len(data["trials"])
    assert all(r.status == "completed" for r in stored)
    assert {r.data_kind for r in stored} == {"synthetic", "real"}


@pytest.mark.parametrize("command", ["recommend", "bench"])
def test_a_data_dir_without_the_data_stops_before_anything_runs(
    tmp_path, monkeypatch, capsys, command
):
    # --data-dir is the only place looked in: a mistyped one is one line, not minutes of
    # measurement on synthetic data.
    runs = StubRuns()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    empty = tmp_path / "empty"
    empty.mkdir()
    store = tmp_path / "r.db"
    code = main([command, "mnist-cnn", "--data-dir", str(empty), "--store", str(store)])
    assert code == 2
    line = one_error_line(capsys)
    assert str(empty) in line
    assert not runs.calls
    assert not store.exists() or not RunStore(store).list_runs()
