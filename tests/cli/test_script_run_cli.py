"""`trainscale run SCRIPT.py -- ARGS` end to end: the example script (a pytorch/examples-style
MNIST CNN on synthetic tensors) measured with 1 and 2 workers and stored completed; a script
that raises stored failed with its line; the example unchanged under plain python."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import runpy
import sys
from pathlib import Path

import pytest

import trainscale
from trainscale.results.store import RunStore
from trainscale.train import meter as meter_module

from tests.helpers.cli import one_error_line, run_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist_script.py"
TINY = ["--max-steps", "4", "--train-samples", "512", "--test-samples", "64"]


def _only_run(store: Path):
    with RunStore(store) as opened:
        (record,) = opened.list_runs()
    return record


def test_the_example_with_one_worker_is_stored_completed(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    args = ["run", str(EXAMPLE), "--data", "synthetic", "--store", str(store)]
    assert run_cli([*args, "--warmup-steps", "1", "--", *TINY]) == 0
    run = _only_run(store)
    assert (run.status, run.workload, run.world_size) == ("completed", "script:mnist_script.py", 1)
    assert run.data_kind == "synthetic"  # as the user said: its accuracy is not claimed
    assert run.config["script"] == str(EXAMPLE)
    assert run.config["script_sha256"] == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert run.config["script_args"] == TINY
    summary = run.summary
    assert summary["num_steps"] == 4 and summary["num_timed_steps"] == 3
    assert summary["global_batch_measured"] == run.global_batch_size == 64
    assert 0 <= summary["data_wait_share"] < 1
    assert summary["test_accuracy"] is not None  # the script's one evaluation
    # Its devices, as a built-in run stores them (no MFU: a script gives no FLOPs).
    assert summary["hardware"]["device_type"] == "cpu" and summary["hardware"]["devices"] >= 1
    assert summary["mfu"] is None and summary["mfu_unknown"]
    assert summary["peak_gpu_memory_bytes_per_worker"] is None  # no CUDA in this script


MOVES_AWAY = """\
import os, sys, trainscale
from beside_the_script import SAMPLES  # a module in the script's folder
meter = trainscale.meter()
os.chdir(sys.argv[1])  # the run's store was given relative to where trainscale started
for _ in range(4):
    with meter.step(samples=SAMPLES):
        pass
"""


def test_a_script_that_changes_directory_is_stored_where_the_command_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    (project / "beside_the_script.py").write_text("SAMPLES = 16\n")
    (project / "train.py").write_text(MOVES_AWAY)
    monkeypatch.chdir(tmp_path)
    args = ["run", "project/train.py", "--store", "runs.db", "--warmup-steps", "1"]
    assert run_cli([*args, "--", str(elsewhere)]) == 0
    run = _only_run(tmp_path / "runs.db")
    assert run.status == "completed" and run.summary["global_batch_measured"] == 16
    assert not list(elsewhere.iterdir())  # no store made where the script went


SETS_ITS_THREADS = """\
import torch, trainscale
torch.set_num_threads(3)  # the script's own, over the run's plan
meter = trainscale.meter()
for _ in range(4):
    with meter.step(samples=8):
        pass
"""


def test_a_script_that_sets_its_own_threads_is_warned_of_and_says_so_in_runs_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, store = tmp_path / "threads.py", tmp_path / "runs.db"
    script.write_text(SETS_ITS_THREADS)
    args = ["--threads-per-worker", "1", "--warmup-steps", "1", "--store", str(store)]
    assert run_cli(["run", str(script), *args, "--"]) == 0
    err = capsys.readouterr().err
    assert "set its own intra-op threads (3 per worker), not the planned 1" in err
    run = _only_run(store)
    assert run.summary["threads_set_by_script"] == {"planned": 1, "per_worker": [3]}
    assert run_cli(["runs", "show", run.run_id, "--store", str(store)]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "threads the script set its own intra-op threads (3 per worker)" in shown


def test_the_example_with_two_workers_through_the_api(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    stored = trainscale.run(script=EXAMPLE, script_args=TINY, workers=2, store=store)
    assert stored is not None
    run = _only_run(store)
    assert (run.status, run.world_size, run.data_kind) == ("completed", 2, "real")  # default
    assert run.summary["steps_per_worker"] == [4, 4]
    assert run.summary["global_batch_measured"] == run.global_batch_size == 128  # 2 x 64


TORCHRUN_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMP_NUM_THREADS",
)


def test_a_script_that_raises_is_one_line_and_stored_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It first writes down the environment it got: torchrun's, so torchrun scripts work.
    seen = tmp_path / "environ.json"
    script = tmp_path / "train.py"
    script.write_text(
        "import json, multiprocessing, os, trainscale\n\n"
        "def main():\n    raise ValueError('boom')\n\n"
        f"names = {TORCHRUN_VARIABLES!r}\n"
        "seen = {n: os.environ.get(n) for n in names}\n"
        "seen['start method'] = multiprocessing.get_start_method()\n"
        "seen['CUDA_VISIBLE_DEVICES'] = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(seen))\n"
        "trainscale.meter()\nmain()\n"
    )
    store = tmp_path / "runs.db"
    capsys.readouterr()
    assert run_cli(["run", str(script), "--threads-per-worker", "1", "--store", str(store)]) == 1
    line = one_error_line(capsys)
    assert "script train.py: ValueError: boom (train.py line 4, in main)" in line
    run = _only_run(store)
    assert run.status == "failed"
    assert "ValueError: boom (train.py line 4, in main)" in run.error
    environ = json.loads(seen.read_text())
    assert all(environ[name] for name in TORCHRUN_VARIABLES), environ
    assert (environ["RANK"], environ["WORLD_SIZE"], environ["OMP_NUM_THREADS"]) == ("0", "1", "1")
    # The platform's default, as in a fresh interpreter under torchrun (its DataLoader
    # workers start as there), not the launcher's spawn.
    assert environ["start method"] == multiprocessing.get_all_start_methods()[0]
    # A CPU run hides the GPUs: a script that trains on "cuda" where torch sees one trains on
    # the CPU the run measures.
    assert environ["CUDA_VISIBLE_DEVICES"] == ""


def test_the_example_runs_unchanged_under_plain_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        sys,
        "argv",
        [str(EXAMPLE), "--max-steps", "2", "--train-samples", "128", "--test-samples", "32"],
    )
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    assert meter_module._active is None  # nothing was measured, nothing to store


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "mnist-cnn", "--", "--epochs", "1"], "are for a script run"),
        (
            ["runs", "list", "--", "x"],
            "after -- are for a script: `trainscale run|bench|recommend SCRIPT.py`",
        ),
        (["run", "missing.py", "--"], "script missing.py not found"),
        (["run", str(EXAMPLE), "--steps", "3"], "--steps does not apply to a script run"),
    ],
)
def test_mistakes_before_the_start_are_one_line_and_store_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    store = tmp_path / "runs.db"
    capsys.readouterr()
    assert run_cli([*args[:2], "--store", str(store), *args[2:]]) == 2
    assert expected in one_error_line(capsys)
    assert not store.exists()


def test_workers_without_a_process_group_are_stopped_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two workers, each training alone: the run would measure two trainings as one.
    script = tmp_path / "alone.py"
    script.write_text(
        "import trainscale\nmeter = trainscale.meter()\nfor _ in range(1000):\n"
        "    with meter.step(samples=4):\n        pass\n"
    )
    store = tmp_path / "runs.db"
    capsys.readouterr()
    args = ["run", str(script), "--workers", "2", "--threads-per-worker", "1"]
    assert run_cli([*args, "--store", str(store), "--"]) == 1
    line = one_error_line(capsys)
    expected = "the script trained 1 step on each of 2 workers without a process group"
    assert expected in line and "--workers 1" in line
    run = _only_run(store)
    assert run.status == "failed" and expected in run.error


RANK_1_LAGS = """\
import os, time
import torch.distributed as dist
import trainscale
dist.init_process_group("gloo")
meter = trainscale.meter()
for _ in range(3):
    with meter.step(samples=4):
        pass
if os.environ["RANK"] == "1":
    time.sleep(120)  # still at it (or stuck in a collective rank 0 left) long after rank 0
"""


def test_a_rank_that_never_finishes_after_rank_0_ended_is_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, store = tmp_path / "lags.py", tmp_path / "runs.db"
    script.write_text(RANK_1_LAGS)
    args = ["run", str(script), "--workers", "2", "--threads-per-worker", "1", "--timeout", "3"]
    capsys.readouterr()
    assert run_cli([*args, "--store", str(store), "--"]) == 1
    line = one_error_line(capsys)
    expected = "rank(s) 1 did not finish within --timeout 3 s of rank 0's script ending"
    assert expected in line and "DistStoreError" not in line
    run = _only_run(store)
    assert run.status == "failed" and expected in run.error
