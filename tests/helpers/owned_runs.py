"""Runs left 'running' by an owner process, for the stale-run and read-only store tests."""

from __future__ import annotations

import subprocess
import sys

import psutil

from trainscale.results.owner import Owner, this_host
from trainscale.results.store import RunStore


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
