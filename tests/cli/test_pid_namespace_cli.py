"""`trainscale` as pid 1 of its own pid namespace (as a container's init process) runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


def test_a_run_whose_command_is_pid_1_succeeds(tmp_path):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to start a process in a new pid namespace")
    env = {k: v for k, v in os.environ.items() if k != "TRAINSCALE_FAULT_INJECT"}
    env.update(HOME=str(tmp_path / "home"), TRAINSCALE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TRAINSCALE_STORE", None)
    run = [sys.executable, "-m", "trainscale", "run", "mnist-cnn", "--data", "synthetic"]
    run += ["--steps", "6", "--no-eval", "--quiet", "--store", str(tmp_path / "s.db")]
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", *run],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    if done.returncode != 0 and "unshare" in done.stderr and "ermi" in done.stderr:
        pytest.skip(f"cannot make a pid namespace here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "failed" not in done.stderr
