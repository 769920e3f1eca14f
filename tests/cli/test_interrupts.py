"""Ctrl-C and SIGTERM: `trainscale run` and `trainscale sweep` as real processes, stopped.

A stopped command prints one line (no traceback, nothing from its workers), exits with
128 + the signal (130, 143), stores the run as failed with the signal in its reason, and
leaves no worker behind. A stopped sweep says how to resume it, and the resume works.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from trainscale.hardware.precision_choice import choose_precision
from trainscale.results.store import RunStore

from tests.helpers.owned_runs import run_rows

START_TIMEOUT_S = 180  # a loaded 2-core machine takes long to import torch in every worker
SPAWNED = "multiprocessing.spawn"  # the command line of a worker process


@dataclass
class Command:
    proc: subprocess.Popen
    out: Path
    err: Path

    @property
    def stdout(self) -> str:
        return self.out.read_text()

    @property
    def stderr(self) -> str:
        return self.err.read_text()


def start(args: list[str], cwd: Path, **env: str) -> Command:
    """`python -m trainscale ARGS` in its own session (a signal to its group is a Ctrl-C)."""
    out, err = cwd / "out.txt", cwd / "err.txt"
    clean = {k: v for k, v in os.environ.items() if k != "TRAINSCALE_FAULT_INJECT"}
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trainscale", *args],
            cwd=cwd,
            env={**clean, **env},
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    return Command(proc, out, err)


def workers(command: Command) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(command.proc.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if SPAWNED in " ".join(child.cmdline()) and "resource_tracker" not in " ".join(
                child.cmdline()
            ):
                found.append(child)
    return found


def listening(process: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return any(c.status == psutil.CONN_LISTEN for c in process.net_connections("inet"))
    return False


def wait_until_running(command: Command, store: Path, num_workers: int, training: bool) -> str:
    """The id of the run once its row is 'running' and its workers exist; with `training`,
    once they have also formed their process group (gloo listens) and trained a moment."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert command.proc.poll() is None, command.stderr[-3000:]
        assert time.monotonic() < deadline, "the run never started: " + command.stderr[-3000:]
        running = [run_id for run_id, status, _ in run_rows(store) if status == "running"]
        found = workers(command)
        started = bool(running) and len(found) == num_workers
        if started and (not training or all(listening(worker) for worker in found)):
            break
        time.sleep(0.1)
    if training:
        time.sleep(1.0)
    return running[0]


def descendants(command: Command) -> list[psutil.Process]:
    return psutil.Process(command.proc.pid).children(recursive=True)


def still_alive(processes: list[psutil.Process], grace_s: float = 20.0) -> list[str]:
    deadline = time.monotonic() + grace_s
    while True:
        alive = []
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{process.pid}: {' '.join(process.cmdline())[:150]}")
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def send(command: Command, signum: int, to_group: bool) -> None:
    """A terminal's Ctrl-C reaches the whole foreground group; `kill PID` only the command."""
    if to_group:
        os.killpg(command.proc.pid, signum)
    else:
        command.proc.send_signal(signum)


def finish(command: Command, timeout_s: float = 60) -> int:
    try:
        return command.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(command.proc.pid, signal.SIGKILL)
        command.proc.wait()
        pytest.fail(f"the command did not stop: {command.stderr[-3000:]}")


def assert_quiet(command: Command, *lines: str) -> None:
    """Everything the command and its workers printed is exactly `lines`."""
    assert command.stderr.splitlines() == list(lines), command.stderr[-3000:]
    assert command.stdout == ""


@pytest.mark.parametrize(
    ("signum", "to_group", "training"),
    [
        # Ctrl-C in a terminal: every process of the group gets SIGINT, the workers while
        # they still import torch (no handler of theirs yet), or while they train.
        pytest.param(signal.SIGINT, True, False, id="ctrl-c-while-workers-start"),
        pytest.param(signal.SIGINT, True, True, id="ctrl-c-while-training"),
        # `kill PID` or a scheduler's SIGTERM to the command alone: it stops its workers.
        pytest.param(signal.SIGTERM, False, True, id="sigterm-to-the-command"),
        pytest.param(signal.SIGTERM, True, False, id="sigterm-to-the-group-while-starting"),
    ],
)
def test_a_stopped_run_says_one_line_exits_128_plus_n_and_is_stored(
    tmp_path: Path, signum: int, to_group: bool, training: bool
) -> None:
    store = tmp_path / "s.db"
    args = ["run", "mnist-cnn", "--data", "synthetic", "--steps", "100000", "--no-eval"]
    args += ["--workers", "2", "--threads-per-worker", "1", "--allow-oversubscribe"]
    command = start([*args, "--store", str(store)], tmp_path)
    try:
        run_id = wait_until_running(command, store, 2, training)
        processes = descendants(command)
        send(command, signum, to_group)
        code = finish(command)
    finally:
        if command.proc.poll() is None:
            os.killpg(command.proc.pid, signal.SIGKILL)
    name = signal.Signals(signum).name
    assert code == 128 + signum
    # The split of the batch, said before the run started; then the one line of the stop.
    said = "trainscale: global batch 128 = 2 workers x 64 per worker"
    choice = choose_precision("auto", "cpu")
    precision = f"trainscale: precision {choice.precision} ({choice.reason})"
    assert_quiet(command, said, precision, f"trainscale: run {run_id[:8]} interrupted ({name})")
    assert "Traceback" not in command.stderr
    with RunStore(store) as runs:
        record = runs.get_run(run_id)
    assert record.status == "failed" and record.error == f"interrupted ({name})"
    assert record.finished_at is not None
    left = still_alive(processes)
    assert not left, f"processes were left behind: {left}"


SWEEP = """
name = "stopped"
[base]
workload = "mnist-cnn"
data = "synthetic"
steps = 20
evaluate = false
batch_size = 8
threads_per_worker = 1
warmup_steps = 1
[grid]
seed = [0, 1]
"""


@pytest.mark.parametrize(
    ("signum", "to_group"),
    [
        pytest.param(signal.SIGTERM, False, id="sigterm"),
        pytest.param(signal.SIGINT, True, id="ctrl-c"),
    ],
)
def test_a_stopped_sweep_says_how_to_resume_and_the_resume_finishes_it(
    tmp_path: Path, signum: int, to_group: bool
) -> None:
    (tmp_path / "stopped.toml").write_text(SWEEP)
    args = ["sweep", "stopped.toml", "--store", "s.db"]
    # The first run hangs in training (rank 0 sleeps after step 2), so the signal lands
    # while it runs, however fast the machine; the resume has no such fault.
    command = start(args, tmp_path, TRAINSCALE_FAULT_INJECT="hang:rank=0:step=2")
    try:
        run_id = wait_until_running(command, tmp_path / "s.db", 1, training=False)
        time.sleep(2.0)
        processes = descendants(command)
        send(command, signum, to_group)
        code = finish(command)
    finally:
        if command.proc.poll() is None:
            os.killpg(command.proc.pid, signal.SIGKILL)
    name = signal.Signals(signum).name
    assert code == 128 + signum
    hint = "trainscale sweep stopped.toml --store s.db --resume"
    lines = command.stderr.splitlines()
    assert lines[-1] == (
        f"trainscale: sweep stopped: run {run_id[:8]} interrupted ({name}); continue it "
        f"with: {hint}"
    ), command.stderr[-3000:]
    # Before it, only the sweep's own header and progress lines: nothing from a worker.
    assert "Traceback" not in command.stderr and "KeyboardInterrupt" not in command.stderr
    assert not [line for line in lines[:-1] if "interrupted" in line or "torch" in line]
    assert not still_alive(processes)
    assert run_rows(tmp_path / "s.db") == [(run_id, "failed", f"interrupted ({name})")]

    words = shlex.split(hint)
    assert words[0] == "trainscale"
    clean = {k: v for k, v in os.environ.items() if k != "TRAINSCALE_FAULT_INJECT"}
    resumed = subprocess.run(
        [sys.executable, "-m", *words],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    with RunStore(tmp_path / "s.db") as runs:
        (sweep,) = runs.list_sweeps()
        records = runs.sweep_runs(sweep.sweep_id)
    completed = sorted(r.sweep_item for r in records if r.status == "completed")
    assert completed == [0, 1], "each planned run completed exactly once"
    assert [(r.run_id, r.error) for r in records if r.status == "failed"] == [
        (run_id, f"interrupted ({name})")
    ]
