"""`trainscale emulate` end to end: stored runs, the report, bad input, and real MNIST."""

from __future__ import annotations

import csv
import json

import pytest

from trainscale.cli import main
from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.mnist_files import write_random_mnist
from tests.helpers.real_data import REAL_DATA_DIR, has_real_mnist


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No real cache, data or home directory leaks into these tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def tiny_mnist(tmp_path):
    """IDX files of 96 random digits and 20 test digits: real files, no accuracy meaning."""
    return write_random_mnist(tmp_path / "mnist", 96, 20)


EMULATE = ["emulate", "mnist-cnn", "--no-download"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--workers", "0", "--mode", "sync"], "--workers"),
        (["--workers", "1,two", "--mode", "sync"], "--workers"),
        (["--workers", "2,2", "--mode", "sync"], "twice"),
        (["--workers", "2", "--mode", "ring-allreduce"], "--mode"),
        (["--workers", "2"], "--mode"),
        (["--workers", "2", "--mode", "sync", "--local-steps", "4"], "--mode local-sgd only"),
        (["--workers", "2", "--mode", "async", "--local-steps", "4"], "--mode local-sgd only"),
        (["--workers", "2", "--mode", "local-sgd", "--local-steps", "0"], "--local-steps"),
        (["--workers", "2", "--mode", "sync", "--staleness-spread", "0.3"], "--mode async only"),
        (["--workers", "2", "--mode", "async", "--staleness-spread", "-1"], "--staleness-spread"),
        (["--workers", "2", "--mode", "sync", "--staleness-aware-lr"], "--mode async only"),
        (["--workers", "2", "--mode", "sync", "--data", "synthetic"], "real data"),
        (["--workers", "2", "--mode", "sync", "--per-worker-batch-size", "0"], "batch"),
        (["--workers", "2", "--mode", "sync", "--epochs", "-1"], "--epochs"),
        (["--workers", "2", "--mode", "sync", "-o", "colour=blue"], "unknown option 'colour'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, fragment, store_path, capsys):
    assert run_cli([*EMULATE, *args, "--store", str(store_path)]) == 2
    assert fragment in one_error_line(capsys)
    assert not store_path.exists() or not RunStore(store_path).list_runs()


def test_unknown_workload_lists_the_valid_ones(store_path, capsys):
    code = run_cli(["emulate", "no-such", "--workers", "2", "--mode", "sync"])
    assert code == 2 and "valid workloads" in one_error_line(capsys)


def test_a_batch_larger_than_a_workers_share_fails_before_any_training(
    tiny_mnist, store_path, capsys
):
    # 96 samples over 8 workers is 12 each: a per-worker batch of 16 does not fit, and N=1
    # must not train first only for N=8 to fail.
    args = ["--workers", "1,8", "--mode", "sync", "--per-worker-batch-size", "16"]
    code = run_cli([*EMULATE, *args, "--data-dir", str(tiny_mnist), "--store", str(store_path)])
    assert code == 2
    assert "8 workers" in one_error_line(capsys)
    assert not RunStore(store_path).list_runs()


@pytest.mark.parametrize(
    ("mode", "holds"), [("async", "a held gradient"), ("local-sgd", "a model replica")]
)
def test_more_workers_than_memory_holds_fail_before_any_training(
    mode, holds, tiny_mnist, store_path, capsys, monkeypatch
):
    from trainscale.hardware.resources import MIB

    # One process with the tiny data and mnist-cnn takes about 170 MiB; each async worker
    # adds a gradient (4.6 MiB), each local-SGD worker a replica with Adam's state (18 MiB).
    monkeypatch.setattr("trainscale.hardware.resources.available_memory_bytes", lambda: 400 * MIB)
    args = ["--workers", "1,96", "--mode", mode, "--per-worker-batch-size", "1"]
    code = run_cli([*EMULATE, *args, "--data-dir", str(tiny_mnist), "--store", str(store_path)])
    assert code == 2
    line = one_error_line(capsys)
    assert f"emulating 96 {mode} workers ({holds}" in line and "emulate at most" in line
    assert not RunStore(store_path).list_runs()


def test_missing_data_is_one_line(tmp_path, store_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ["--workers", "2", "--mode", "sync", "--data-dir", str(empty)]
    assert run_cli([*EMULATE, *args, "--store", str(store_path)]) == 2
    line = one_error_line(capsys)
    assert str(empty) in line
    # Its way on is the data: --data synthetic is refused by an emulation.
    assert "--data synthetic" not in line and "it needs the real data" in line


def test_each_n_is_a_stored_run_and_the_report_groups_them(tiny_mnist, store_path, capsys):
    args = [
        "--workers",
        "1,2",
        "--mode",
        "local-sgd",
        "--local-steps",
        "2",
        "--per-worker-batch-size",
        "8",
        "--steps",
        "4",
        "--eval-every",
        "2",
        "--target-accuracy",
        "0.01",
        "--lr-scaling",
        "linear",
    ]
    code = main([*EMULATE, *args, "--data-dir", str(tiny_mnist), "--store", str(store_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "local-sgd" in out and "report: trainscale report --runs" in out

    with RunStore(store_path) as store:
        runs = sorted(store.list_runs(), key=lambda r: r.config["emulation"]["workers"])
    assert [r.config["emulation"]["workers"] for r in runs] == [1, 2]
    assert all(r.status == "completed" and r.world_size == 1 for r in runs)
    assert all(r.data_kind == "real" for r in runs)
    assert len({r.tag for r in runs}) == 1 and runs[0].tag.startswith("emulate:")
    assert len({r.config_hash for r in runs}) == 2
    assert [r.global_batch_size for r in runs] == [8, 16]
    emulation = runs[1].summary["emulation"]
    assert emulation["mode"] == "local-sgd" and emulation["local_steps"] == 2
    assert emulation["global_batch_size"] == 16 and emulation["per_worker_batch_size"] == 8
    assert emulation["steps_to_target"] == 2 and emulation["samples_to_target"] == 32
    assert emulation["staleness"] is None and emulation["lr_scaling"] == "linear"
    assert runs[1].config["lr"] == pytest.approx(runs[1].config["base_lr"] * 16 / 64)

    report_args = out.split("report: ", 1)[1].split()[1:]  # drop the program name
    assert main([*report_args, "--store", str(store_path)]) == 0
    markdown = store_path.parent / report_args[report_args.index("--out") + 1] / "report.md"
    text = markdown.read_text()
    assert "local-sgd x1 H=2" in text and "local-sgd x2 H=2" in text
    # Steps and samples to target, not the one process's clock (nor a cost, nor platforms).
    assert "emulation: 2 steps (32 samples) to target; its clock is one process's" in text
    assert "Time and accuracy per platform" not in text
    assert "| 2 steps |" in text and "not reached" not in text  # reached, in steps
    rows = {r["configuration"]: r for r in csv.DictReader((markdown.parent / "report.csv").open())}
    (two,) = [row for label, row in rows.items() if label.startswith("local-sgd x2 H=2")]
    assert (two["steps_to_target"], two["samples_to_target"]) == ("2.0", "32.0")
    assert two["time_to_target_s"] == "" and two["cost_to_target_usd"] == ""
    # `runs list` shows no time to target either: the clock is one process's.
    from trainscale.reporting.listing import time_to_target_cell

    assert runs[1].figures.time_to_target_s is not None
    assert {time_to_target_cell(r) for r in runs} == {"-"}


def test_json_output_carries_every_n(tiny_mnist, store_path, capsys):
    args = ["--workers", "1,3", "--mode", "async", "--per-worker-batch-size", "8", "--steps", "6"]
    code = main(
        [*EMULATE, *args, "--data-dir", str(tiny_mnist), "--store", str(store_path), "--json"]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mode"] == "async" and result["tag"] == f"emulate:{result['emulation_id']}"
    assert [r["workers"] for r in result["runs"]] == [1, 3]
    assert result["runs"][0]["staleness"]["max"] == 0
    assert result["runs"][1]["staleness"]["mean"] > 0
    assert all(r["global_batch_size"] == 8 for r in result["runs"])
    assert result["report"].startswith("trainscale report --runs ")


@pytest.mark.slow
@pytest.mark.skipif(not has_real_mnist(), reason="TRAINSCALE_DATA_DIR does not hold MNIST")
def test_real_mnist_sync_emulation_learns(store_path, capsys, monkeypatch):
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(REAL_DATA_DIR))
    args = ["--workers", "2", "--mode", "sync", "--lr-scaling", "linear", "--steps", "150"]
    code = main([*EMULATE, *args, "--store", str(store_path), "--json"])
    assert code == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["global_batch_size"] == 128 and run["total_steps"] == 150
    # Measured 0.9784 after 150 steps of 2 x 64 samples (19,200 samples, a third of an
    # epoch); 0.96 leaves room for other machines' arithmetic and is far above chance (0.10).
    assert run["test_accuracy"] >= 0.96, run["test_accuracy"]


def test_a_diverging_emulation_is_a_failed_run_in_one_line_exit_1(tiny_mnist, store_path, capsys):
    args = ["--workers", "1,2,4", "--mode", "sync", "--per-worker-batch-size", "8"]
    args += ["--steps", "4", "--optimizer", "sgd", "--lr", "1e12", "--data-dir", str(tiny_mnist)]
    assert run_cli([*EMULATE, *args, "--store", str(store_path), "--quiet"]) == 1
    line = one_error_line(capsys)
    assert "(N = 1) failed: diverged" in line and line.endswith("not run: N = 2, 4")
    with RunStore(store_path) as store:
        (run,) = store.list_runs()
    assert run.status == "failed" and run.error and run.error.startswith("diverged")


def test_a_store_removed_while_an_n_trains_keeps_its_result_in_a_copy(
    tiny_mnist, store_path, capsys, monkeypatch
):
    import trainscale.emulation.engine as engine

    trained = engine.emulate

    def then_removed(*args, **kwargs):
        outcome = trained(*args, **kwargs)
        store_path.unlink()  # the store goes while N = 1 trains
        return outcome

    monkeypatch.setattr(engine, "emulate", then_removed)
    args = ["--workers", "1", "--mode", "sync", "--per-worker-batch-size", "8", "--steps", "2"]
    args += ["--data-dir", str(tiny_mnist), "--store", str(store_path), "--quiet"]
    assert run_cli([*EMULATE, *args]) == 2
    line = one_error_line(capsys)
    assert "the run's result was saved to" in line
    saved = line.split("saved to ")[1].split(" instead")[0]
    with RunStore(saved) as copy:
        (run,) = copy.list_runs()
    assert run.status == "completed"


def test_an_architecture_is_refused_by_emulate_and_predict_with_advice_that_works(
    store_path, capsys
):
    assert run_cli(["emulate", "resnet50", "--workers", "1,2", "--mode", "sync"]) == 2
    line = one_error_line(capsys)
    assert "cannot be emulated" in line and "--data synthetic" not in line
    assert "`trainscale simulate resnet50`" in line
    with RunStore(store_path):
        pass
    assert run_cli(["predict-time-to-accuracy", "resnet50", "--store", str(store_path)]) == 2
    line = one_error_line(capsys)
    assert "no emulation to predict from" in line and "trainscale emulate" not in line
