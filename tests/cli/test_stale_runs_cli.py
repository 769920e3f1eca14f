"""Runs that can no longer finish do not stay 'running' for ever.

A run whose process was SIGKILLed is found stale by the next command that reads runs; a
run on another host is shown as running there; a disk that fills mid-run fails the run and
says in one line that it could not be recorded (then the run is found stale once the space
is back); a sweep still running is not resumed a second time.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from trainscale.errors import StoreError, TrainscaleError
from trainscale.results.owner import Owner, current_owner, this_host
from trainscale.results.store import RunStore
from trainscale.runner.record import create_run_row
from trainscale.sweeps.execute import execute_sweep
from trainscale.sweeps.plan import make_plan
from trainscale.sweeps.spec import parse_spec

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.owned_runs import create_owned_run, run_rows

HERE = Path(__file__).parent
START_TIMEOUT_S = 180


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


def test_a_run_whose_command_was_killed_is_failed_as_stale_when_runs_are_read(
    tmp_path, store_path, capsys
):
    env = {k: v for k, v in os.environ.items() if k != "TRAINSCALE_FAULT_INJECT"}
    cmd = [sys.executable, "-m", "trainscale", "run", "mnist-cnn", "--data", "synthetic"]
    cmd += ["--steps", "100000", "--no-eval", "--threads-per-worker", "1", "--quiet"]
    proc = subprocess.Popen(
        [*cmd, "--store", str(store_path)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        # Its row first: before the row, the command's only child may be the `git` that
        # records the revision, and killing it then leaves no run to find stale.
        while not (run_rows(store_path) and psutil.Process(proc.pid).children()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        workers = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGKILL)  # no clean-up of any kind
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    psutil.wait_procs(workers, timeout=15)  # they die with their launcher

    assert run_cli(["runs", "list", "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert "failed" in out and "running" not in out
    with RunStore(store_path) as store:
        (record,) = store.list_runs()
    assert record.status == "failed" and record.finished_at is not None
    assert record.error.startswith(f"stale: owning process {proc.pid} on {this_host()} is gone")


def test_a_run_on_another_host_is_listed_as_running_there(store_path, capsys):
    with RunStore(store_path) as store:
        create_owned_run(store, "elsewhere0000", owner=Owner("gpu-node-7", 4242, 1.0))
    assert run_cli(["runs", "list", "--store", str(store_path)]) == 0
    assert "running on gpu-node-7" in capsys.readouterr().out
    assert run_cli(["runs", "show", "elsewhere", "--store", str(store_path)]) == 0
    shown = capsys.readouterr().out
    assert "running on gpu-node-7" in shown and "process 4242 on gpu-node-7" in shown
    with RunStore(store_path) as store:
        assert store.get_run("elsewhere0000").status == "running"


def test_a_run_in_another_container_of_the_same_name_is_not_failed_by_runs_list(store_path, capsys):
    """Its pid is not visible from here (another pid namespace, or another machine of the
    same host name): `runs list` must not take it for dead, and its result is still taken."""
    me = current_owner()
    gone_here = subprocess.Popen([sys.executable, "-c", "pass"])
    gone_here.wait()  # a pid that means nothing here any more
    other_ns = dataclasses.replace(me, pid=gone_here.pid, pid_ns=(me.pid_ns or 0) + 1)
    other_boot = dataclasses.replace(me, pid=gone_here.pid, boot_id="another-machine")
    with RunStore(store_path) as store:
        create_owned_run(store, "container0000", owner=other_ns)
        create_owned_run(store, "twinhost0000", owner=other_boot)
    assert run_cli(["runs", "list", "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert "failed" not in out and out.count(f"running on {this_host()}") == 2
    with RunStore(store_path) as store:
        store.complete_run("container0000", {"samples_per_s": 1.0}, [], [0.1])
        assert store.get_run("container0000").status == "completed"
        assert store.get_run("twinhost0000").status == "running"


def test_a_failure_the_store_refuses_is_said_in_one_line(store_path, capsys, monkeypatch):
    """The workers failed, and recording that fails too (the store's disk is full)."""
    from trainscale.parallel import launcher
    from trainscale.results import store as store_module

    def workers_fail(*args, **kwargs):
        raise launcher.WorkersFailed("worker rank 0 (pid 1) failed: StoreError: disk is full")

    def store_refuses(self, run_id, reason, **kwargs):
        raise StoreError(f"cannot write results store {self.path}: database or disk is full")

    monkeypatch.setattr(launcher, "launch_workers", workers_fail)
    monkeypatch.setattr(store_module.RunStore, "fail_run", store_refuses)
    args = ["run", "mnist-cnn", "--data", "synthetic", "--steps", "4", "--quiet"]
    assert run_cli([*args, "--store", str(store_path)]) == 1
    line = one_error_line(capsys)
    assert line.startswith("trainscale: run ") and "failed: worker rank 0" in line
    assert line.endswith(
        f"; the run could not be recorded as failed: cannot write results store {store_path}: "
        "database or disk is full"
    )


def test_a_disk_that_fills_mid_run_fails_it_and_no_row_stays_running(tmp_path):
    """A real full disk: a small tmpfs in a private mount namespace (root only)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to mount a small file system privately")
    folder = tmp_path / "small-disk"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TRAINSCALE_FAULT_INJECT"}
    done = subprocess.run(
        ["unshare", "--mount", sys.executable, str(HERE / "full_disk_driver.py"), str(folder)]
        + ["4096", "200"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode != 0 and "mount" in done.stderr and "permission" in done.stderr.lower():
        pytest.skip(f"cannot mount here: {done.stderr[-500:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    full, after = result["full"], result["after"]

    # Rank 0 could not write the result; the parent could not record the failure either.
    assert full["code"] == 1
    last = full["stderr"].strip().splitlines()[-1]
    assert last.startswith("trainscale: run ") and "database or disk is full" in last
    assert "StoreError: cannot write results store" in last
    assert "the run could not be recorded as failed: cannot write results store" in last
    assert full["row"] == ["running", None]  # nothing could be written

    # Space is back: the next command that reads runs finds the run stale.
    assert after["code"] == 0, after["stderr"]
    status, error = after["row"]
    assert status == "failed"
    assert error.startswith(f"stale: owning process {full['parent_pid']} on {result['host']}")
    assert "failed" in after["stdout"] and "running" not in after["stdout"]


def test_a_sweep_still_running_on_this_machine_is_not_resumed_twice(tmp_path):
    spec = parse_spec(
        {"base": {"workload": "mnist-cnn", "data": "synthetic", "steps": 3}, "grid": {}},
        default_name="t",
    )
    store_path = tmp_path / "s.db"

    def stop_after_creating_the_row(options, store_path, quiet, slot, config):
        with RunStore(store_path) as store:
            create_run_row(store, "in-flight", config, slot)
        # As if another `trainscale sweep` process were making this run right now.
        conn = sqlite3.connect(store_path)
        conn.execute(
            "UPDATE runs SET owner_pid = ?, owner_started = ? WHERE run_id = 'in-flight'",
            (other.pid, psutil.Process(other.pid).create_time()),
        )
        conn.commit()
        conn.close()
        raise KeyboardInterrupt

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        with pytest.raises(KeyboardInterrupt):
            execute_sweep(
                spec, make_plan(spec), store_path, "x", run_one=stop_after_creating_the_row
            )
        with pytest.raises(TrainscaleError, match=f"still running.*process {other.pid}"):
            execute_sweep(spec, make_plan(spec), store_path, "x", resume=True, run_one=None)
    finally:
        other.kill()
        other.wait()

    def complete(options, store_path, quiet, slot, config):
        with RunStore(store_path) as store:
            create_run_row(store, "second", config, slot)
            store.complete_run("second", {"samples_per_s": 1.0}, [], [0.1])
        return {"run_id": "second", "samples_per_s": 1.0}

    # Its process is gone now: the run is stale, and the sweep resumes.
    outcome = execute_sweep(spec, make_plan(spec), store_path, "x", resume=True, run_one=complete)
    assert outcome.resumed and outcome.completed == ["second"]
    with RunStore(store_path) as store:
        in_flight = store.get_run("in-flight")
    assert in_flight.status == "failed" and in_flight.error.startswith("stale: owning process")
