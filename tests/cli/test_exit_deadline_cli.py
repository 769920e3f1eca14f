"""A custom workload that leaves a non-daemon thread running: the run is stored completed
and `trainscale run` still exits, with status 0, within the exit deadline, saying in one
line per process what it left behind."""

from __future__ import annotations

from pathlib import Path

from trainscale.results.store import RunStore
from trainscale.runner.exit_deadline import DEADLINE_ENV

from tests.helpers.custom_workloads import run_in_subprocess, tiny_workload

LEFTOVER = (
    "import threading, time\n"
    "threading.Thread(target=time.sleep, args=(3600,), name='leftover').start()\n"
)


def test_a_leftover_thread_does_not_keep_the_command_alive(tmp_path: Path):
    path = tiny_workload(tmp_path, "leftover")
    path.write_text(LEFTOVER + path.read_text())  # started in the command and in the worker
    done, took = run_in_subprocess(tmp_path, path, 240, {DEADLINE_ENV: "1"})
    assert done.returncode == 0, done.stderr
    assert took < 240
    lines = [line for line in done.stderr.splitlines() if "leftover" in line]
    ended = "thread 'leftover' was still running 1 s after the work ended; exiting with status 0"
    assert lines == [f"trainscale: worker rank 0: {ended}", f"trainscale: {ended}"], done.stderr
    assert "Traceback" not in done.stderr
    with RunStore(tmp_path / "runs.db") as runs:
        (record,) = runs.list_runs()
    assert record.status == "completed"
