"""Runs left 'running' by an owner process, for the stale-run and read-only store tests."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil

from trainscale.results.owner import Owner, this_host
from trainscale.results.store import RunStore


def run_rows(store: Path) -> list[tuple[str, str, str | None]]:
    """(run id, status, error) of every run, read without opening a RunStore: a test that
    watches a command's store must not create the file or take its locks."""
    if not store.exists():
        return []
    try:
        conn = sqlite3.connect(store, timeout=5)
        try:
            return conn.execute("SELECT run_id, status, error FROM runs").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:  # the file may be mid-creation
        return []


def create_owned_run(store: RunStore, run_id: str, owner: Owner | None = None) -> None:
    """A 'running' mnist-cnn row of `run_id`, owned by `owner` (default: this process)."""
    store.create_run(
        run_id,
        "mnist-cnn",
        {"workload": "mnist-cnn"},
        {"cpu_model": "X"},
        data_kind="synthetic",
        world_size=1,
        threads_per_worker=1,
        affinity="none",
        precision="fp32",
        global_batch_size=8,
        owner=owner,
    )


def dead_owner() -> Owner:
    """The owner record of a process of this host that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    owner = Owner(this_host(), child.pid, psutil.Process(child.pid).create_time())
    child.kill()
    child.wait()
    return owner
