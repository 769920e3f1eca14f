"""A custom workload whose model ends the worker's process with status 0 (`os._exit(0)`):
`trainscale run` fails the run in one line, exit status 1, instead of waiting forever with
the run left `running`."""

from __future__ import annotations

from pathlib import Path

from trainscale.results.store import RunStore

from tests.helpers.custom_workloads import run_in_subprocess, tiny_workload

BOUND_S = 120
"""Without the launcher's watch the command never ends; with it, a few seconds after the
worker started (the bound leaves room for a busy machine)."""


def test_a_worker_ended_by_the_workload_fails_the_run_in_one_line(tmp_path: Path):
    path = tiny_workload(tmp_path, "exit-os", forward="import os; os._exit(0)")
    done, took = run_in_subprocess(tmp_path, path, BOUND_S)
    assert took < BOUND_S
    assert done.returncode == 1, done.stderr
    reason = (
        "ended (exit status 0) without finishing its work: the workload ended the process "
        "(os._exit?)"
    )
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("trainscale: ") and "worker rank 0 (pid " in line, line
    assert reason in line, line
    with RunStore(tmp_path / "runs.db") as runs:
        (record,) = runs.list_runs()
    assert record.status == "failed" and reason in (record.error or "")
