"""Ctrl-C and SIGTERM during a script run whose script hangs in a step: `trainscale run
SCRIPT.py` as a real process, stopped as a built-in run is (tests/cli/test_interrupts.py).

The command prints one line, exits with 128 + the signal within the launcher's grace
period, stores the run as interrupted, leaves no process behind, and keeps no traceback:
a script stopped by a signal has not failed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from trainscale.results.store import RunStore
from trainscale.runner.failure_log import traceback_path

from tests.cli.test_interrupts import descendants, finish, send, start, still_alive

STARTED_S = 180  # a loaded 2-core machine takes long to import torch in a worker
STOPPED_S = 20  # the launcher's 5 s between its signal and SIGKILL, and a loaded machine

HANGS = """
import pathlib
import sys
import time

import trainscale

meter = trainscale.meter()
for _ in range(3):
    with meter.step(samples=4):
        time.sleep(0.01)
with meter.step(samples=4):
    pathlib.Path(sys.argv[1]).touch()  # the test's cue: the step has begun
    time.sleep(600)
"""


@pytest.mark.parametrize(
    ("signum", "to_group"),
    [
        pytest.param(signal.SIGINT, True, id="ctrl-c"),  # a terminal's: the whole group
        pytest.param(signal.SIGTERM, False, id="sigterm-to-the-command"),  # `kill PID`
    ],
)
def test_a_script_hanging_in_a_step_is_stopped_in_one_line_and_stored_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int, to_group: bool
) -> None:
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))  # its tracebacks
    (tmp_path / "hangs.py").write_text(HANGS)
    store, cue = tmp_path / "s.db", tmp_path / "in-step"
    args = ["run", "hangs.py", "--data", "synthetic", "--threads-per-worker", "1", "--quiet"]
    command = start([*args, "--store", str(store), "--", str(cue)], tmp_path)
    try:
        deadline = time.monotonic() + STARTED_S
        while not cue.exists():
            assert command.proc.poll() is None, command.stderr[-3000:]
            assert time.monotonic() < deadline, "the script never began its step"
            time.sleep(0.1)
        processes = descendants(command)
        sent = time.monotonic()
        send(command, signum, to_group)
        code = finish(command)
        took = time.monotonic() - sent
    finally:
        if command.proc.poll() is None:
            os.killpg(command.proc.pid, signal.SIGKILL)
    name = signal.Signals(signum).name
    assert code == 128 + signum
    assert took < STOPPED_S
    with RunStore(store) as runs:
        (record,) = runs.list_runs()
    assert command.stderr.splitlines() == [
        f"trainscale: run {record.run_id[:8]} interrupted ({name})"
    ], command.stderr[-3000:]
    assert command.stdout == ""
    assert (record.status, record.error) == ("failed", f"interrupted ({name})")
    assert record.finished_at is not None
    assert not traceback_path(record.run_id, 0).exists()  # nothing failed: no traceback
    assert not still_alive(processes)
