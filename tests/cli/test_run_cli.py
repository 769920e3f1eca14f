"""`trainscale run` end to end: results, bad input, and workers that crash or hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from trainscale.cli import main
from trainscale.hardware.precision_choice import choose_precision
from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.mnist_files import write_idx, write_random_mnist
from tests.helpers.real_data import has_real_mnist

SYNTH = ["--data", "synthetic", "--steps", "4", "--batch-size", "16", "--quiet"]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No real cache, data or home directory leaks into these tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    monkeypatch.chdir(tmp_path)


def test_synthetic_run_prints_json_and_is_stored(store_path, capsys):
    code = main(["run", "mnist-cnn", *SYNTH, "--store", str(store_path), "--json", "--tag", "t1"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    for key in (
        "run_id",
        "workload",
        "status",
        "data",
        "world_size",
        "threads_per_worker",
        "affinity",
        "precision",
        "global_batch_size",
        "samples_per_s",
        "step_time_s_median",
        "epoch_time_s",
        "time_to_target_s",
        "test_accuracy",
        "env",
    ):
        assert key in result
    assert result["status"] == "completed" and result["data"] == "synthetic"
    assert result["test_accuracy"] is None and result["time_to_target_s"] is None
    assert result["samples_per_s"] > 0
    with RunStore(store_path) as store:
        record = store.get_run(result["run_id"])
        assert record.tag == "t1"
        assert len(store.step_times(result["run_id"])) == 4
        assert record.summary["workers"][0]["torch_threads"] >= 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["run", "no-such-workload"], "valid workloads"),
        (["run", "mnist-cnn", "--workers", "2", "--affinity", "0;4096"], "4096"),
        (
            [
                "run",
                "mnist-cnn",
                "--workers",
                str((os.cpu_count() or 1) + 1),
                "--threads-per-worker",
                "1",
            ],
            "oversubscribes",
        ),
        (["run", "mnist-cnn", "--batch-size", "0"], "--batch-size"),
        (["run", "mnist-cnn", "--lr", "fast"], "--lr"),
        (["run", "mnist-cnn", "--epochs", "-1"], "--epochs"),
        (["run", "mnist-cnn", "--precision", "fp8"], "--precision"),
        (["run", "mnist-cnn", "-o", "colour=blue"], "unknown option 'colour'"),
        (["run", "mnist-cnn", "-o", "novalue"], "KEY=VALUE"),
        # A tag is printed raw by listings: a newline or a terminal escape would break them.
        (["run", "mnist-cnn", "--tag", "a\nb\x1b[31mred"], "holds a control character"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, fragment, store_path, capsys):
    assert run_cli([*args, "--store", str(store_path)]) == 2
    assert fragment in one_error_line(capsys)
    assert not store_path.exists() or not RunStore(store_path).list_runs()


def test_missing_data_lists_where_it_looked(tmp_path, store_path, capsys, monkeypatch):
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    code = main(
        ["run", "mnist-cnn", "--data-dir", str(empty), "--no-download", "--store", str(store_path)]
    )
    assert code == 2
    line = one_error_line(capsys)
    assert str(empty) in line and "TRAINSCALE_DATA_DIR" in line


@pytest.mark.parametrize("command", ["run", "emulate"])
@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_explicit_data_dir_is_used_or_refused(
    command, kind, tmp_path, store_path, capsys, monkeypatch
):
    # MNIST where the search would find it: an explicit --data-dir must not fall back to it.
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(write_random_mnist(tmp_path / "env", 64, 16)))
    explicit = tmp_path / kind
    if kind == "empty":
        explicit.mkdir()
    extra = ["--workers", "2", "--mode", "sync"] if command == "emulate" else []
    code = run_cli(
        [command, "mnist-cnn", *extra, "--data-dir", str(explicit), "--steps", "5", "--quiet",
         "--store", str(store_path)]
    )  # fmt: skip
    assert code == 2
    line = one_error_line(capsys)
    assert f"mnist not found in {explicit} (--data-dir)" in line
    assert "train-images-idx3-ubyte[.gz]" in line  # what was expected there
    assert str(tmp_path / "env") not in line
    assert not store_path.exists() or not RunStore(store_path).list_runs()


def test_corrupt_data_names_the_file(tmp_path, store_path, capsys, monkeypatch):
    import numpy as np

    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    data = tmp_path / "mnist"
    data.mkdir()
    for name, n in (("train", 60), ("t10k", 10)):
        write_idx(data / f"{name}-images-idx3-ubyte", np.zeros((n, 28, 28), np.uint8), gzip=False)
        write_idx(data / f"{name}-labels-idx1-ubyte", np.zeros(n, np.uint8), gzip=False)
    bad = data / "train-images-idx3-ubyte"
    bad.write_bytes(bad.read_bytes()[:-100])  # truncated
    code = main(
        ["run", "mnist-cnn", "--data-dir", str(data), "--no-download", "--store", str(store_path)]
    )
    assert code == 2
    assert "train-images-idx3-ubyte" in one_error_line(capsys)


def test_unwritable_store_is_refused(tmp_path, capsys):
    code = main(["run", "mnist-cnn", *SYNTH, "--store", str(tmp_path / "no" / "such" / "x.db")])
    assert code == 2
    assert "x.db" in one_error_line(capsys)


def _refused_before_launch(args: list[str], store_path, capsys, monkeypatch) -> str:
    """Run `trainscale run ARGS`, assert exit 2, nothing stored and no worker launched;
    return the one error line."""
    launched = []
    monkeypatch.setattr(
        "trainscale.parallel.launcher.launch_workers", lambda *a, **k: launched.append(a)
    )
    assert run_cli(["run", *args, "--quiet", "--store", str(store_path)]) == 2
    line = one_error_line(capsys)
    assert not launched
    assert not store_path.exists() or not RunStore(store_path).list_runs()
    return line


ANY_CORES = ["--threads-per-worker", "1", "--affinity", "none", "--allow-oversubscribe"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--data", "synthetic", "--batch-size", "60001"], "(60000 of 60000 samples)"),
        (
            ["--data", "synthetic", "--workers", "2", *ANY_CORES, "--global-batch-size", "60002"],
            "30000 of 60000 samples over 2 workers",
        ),
        (["--batch-size", "97"], "96 of 96 samples"),  # the real files below hold 96
    ],
)
def test_a_batch_larger_than_a_workers_share_is_refused_before_launch(
    args, fragment, tmp_path, store_path, capsys, monkeypatch
):
    tiny = write_random_mnist(tmp_path / "mnist", 96, 20)
    args = ["mnist-cnn", *args, "--data-dir", str(tiny), "--no-download"]
    line = _refused_before_launch(args, store_path, capsys, monkeypatch)
    assert "per-worker batch size" in line and fragment in line


def test_more_workers_than_the_machine_can_start_is_one_line(store_path, capsys, monkeypatch):
    from trainscale.hardware.facts import usable_cores
    from trainscale.hardware.resources import MAX_WORKERS_PER_CORE

    too_many = MAX_WORKERS_PER_CORE * len(usable_cores()) + 1
    args = ["mnist-cnn", "--data", "synthetic", "--workers", str(too_many), *ANY_CORES]
    line = _refused_before_launch(args, store_path, capsys, monkeypatch)
    assert f"--workers {too_many} is more worker processes than this machine can run" in line
    # An open-file limit that 2 workers exceed ("too many open files" in the launcher, else).
    monkeypatch.setattr("trainscale.hardware.resources.open_file_limit", lambda: 70)
    args = ["mnist-cnn", "--data", "synthetic", "--workers", "2", *ANY_CORES]
    line = _refused_before_launch(args, store_path, capsys, monkeypatch)
    assert "open files" in line and "ulimit -n" in line


def test_a_run_that_cannot_fit_in_memory_is_one_line(store_path, capsys, monkeypatch):
    from trainscale.hardware.resources import MIB

    monkeypatch.setattr("trainscale.hardware.resources.available_memory_bytes", lambda: 300 * MIB)
    line = _refused_before_launch(
        ["mnist-cnn", "--data", "synthetic"], store_path, capsys, monkeypatch
    )
    assert "needs about" in line and "300 MiB available" in line


def _children_of_this_test() -> set[int]:
    """Live child processes, except multiprocessing's resource tracker (it lives as long as
    the parent by design, shared by every spawn)."""
    pids = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if "resource_tracker" not in " ".join(child.cmdline()):
                pids.add(child.pid)
        except psutil.NoSuchProcess:
            pass
    return pids


@pytest.mark.parametrize("fault", ["crash", "hang"])
def test_failing_worker_ends_the_run_and_is_stored_failed(fault, store_path, capsys, monkeypatch):
    monkeypatch.setenv("TRAINSCALE_FAULT_INJECT", f"{fault}:rank=1:step=2")
    before = _children_of_this_test()
    start = time.monotonic()
    code = main(
        [
            "run",
            "mnist-cnn",
            *SYNTH,
            "--workers",
            "2",
            "--threads-per-worker",
            "1",
            "--allow-oversubscribe",
            "--timeout",
            # Long enough that a loaded CI machine does not time out DDP's start-up check
            # before the fault; short enough that the hang case ends well inside the bound.
            "15",
            "--store",
            str(store_path),
        ]
    )
    elapsed = time.monotonic() - start
    assert code == 1
    err = capsys.readouterr().err
    assert "failed" in err.splitlines()[-1]
    assert elapsed < 60, "a hung worker must not hang the run"
    with RunStore(store_path) as store:
        (record,) = store.list_runs()
    assert record.status == "failed"
    # A crash is reported as itself; a hang as the peer's collective timing out.
    assert ("injected crash" if fault == "crash" else "Timed out") in record.error
    left = _children_of_this_test() - before
    deadline = time.monotonic() + 10
    while left and time.monotonic() < deadline:  # give killed workers a moment to be reaped
        time.sleep(0.2)
        left = {
            pid
            for pid in left
            if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        }
    described = [" ".join(psutil.Process(pid).cmdline())[:200] for pid in left]
    assert not left, f"worker processes were left behind: {described}"


def test_joins_an_external_torchrun(tmp_path, store_path):
    env = {k: v for k, v in os.environ.items() if k != "TRAINSCALE_FAULT_INJECT"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "trainscale",
        "run",
        "mnist-cnn",
        *SYNTH,
        "--threads-per-worker",
        "1",
        "--allow-oversubscribe",
        "--store",
        str(store_path),
        "--json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with RunStore(store_path) as store:
        runs = store.list_runs()
    assert len(runs) == 1, "only global rank 0 writes the run"
    assert runs[0].world_size == 2 and runs[0].status == "completed"
    printed = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [p["run_id"] for p in printed] == [runs[0].run_id]


@pytest.mark.slow
@pytest.mark.skipif(not has_real_mnist(), reason="TRAINSCALE_DATA_DIR does not hold MNIST")
def test_the_default_run_reaches_99_percent_on_real_mnist(store_path, capsys, monkeypatch):
    # Every default: the recipe, workers, threads and precision auto (bf16 where this CPU
    # computes it natively). The recipe must reach the workload's target in that precision.
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", os.environ["TRAINSCALE_DATA_DIR"])
    code = main(["run", "mnist-cnn", "--store", str(store_path), "--json", "--quiet"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["data"] == "real"
    assert result["precision"] == choose_precision("auto", "cpu").precision
    assert result["precision_reason"].startswith("auto: ")
    assert result["test_accuracy"] >= 0.99, result["test_accuracy"]
    assert result["time_to_target_s"] is not None
    assert result["time_to_target_s"] < result["train_time_s"]  # reached before the end
    with RunStore(store_path) as store:
        epochs = store.epochs(result["run_id"])
    assert len(epochs) == 3  # 2.5 epochs: two whole ones and the half
    assert epochs[-1]["test_accuracy"] == pytest.approx(result["test_accuracy"])


def test_workers_2_says_the_batch_split_before_it_starts(store_path, capsys, monkeypatch):
    said_before_start = []

    def started(options, store=None, quiet=False, sweep=None, config=None):
        said_before_start.append(capsys.readouterr().err)
        assert config is not None  # resolved once, by the command, not again
        from trainscale.runner.launch import RunFailed

        raise RunFailed("run0001", "stand-in")

    monkeypatch.setattr("trainscale.runner.launch.execute_run", started)
    args = ["run", "mnist-cnn", "--data", "synthetic", "--workers", "2", *ANY_CORES]
    # auto's choice on this machine, then (named) fp32's: the line says what and why.
    choice = choose_precision("auto", "cpu")
    auto_line = f"trainscale: precision {choice.precision} ({choice.reason})\n"
    assert run_cli([*args, "--store", str(store_path)]) == 1
    assert said_before_start == [
        "trainscale: global batch 128 = 2 workers x 64 per worker\n" + auto_line
    ]
    capsys.readouterr()
    run_cli([*args, "--global-batch-size", "64", "--precision", "fp32", "--store", str(store_path)])
    assert said_before_start[1] == (
        "trainscale: global batch 64 = 2 workers x 32 per worker\n"
        "trainscale: precision fp32 (--precision fp32)\n"
    )
    capsys.readouterr()
    run_cli([*args, "--quiet", "--store", str(store_path)])
    assert said_before_start[2] == ""
