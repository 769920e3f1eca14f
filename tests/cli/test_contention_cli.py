"""A run on a busy machine is detected and stored as busy, warned about and marked in the
listings; a sampler that breaks never fails the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from trainscale.cli import main
from trainscale.hardware import contention
from trainscale.hardware.contention import BUSY, OTHER_CORES_LIMIT, UNKNOWN
from trainscale.results.store import RunStore

from tests.helpers.cli import run_cli

# A busy loop pinned to one core: the classic neighbour.
BURNER = (
    "import os, sys\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "print('burning', flush=True)\n"
    "while True:\n"
    "    pass\n"
)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def burner():
    """A CPU-burning process pinned to the first usable core; yields that core."""
    if not hasattr(os, "sched_setaffinity") or not os.path.exists("/proc/stat"):
        pytest.skip("needs sched_setaffinity and /proc/stat (Linux)")
    core = min(os.sched_getaffinity(0))
    process = subprocess.Popen(
        [sys.executable, "-c", BURNER, str(core)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "burning"
        yield core
    finally:
        process.kill()
        process.wait(timeout=30)


def test_a_neighbour_pinned_to_the_runs_core_makes_the_run_busy(burner, store_path, capsys):
    # The run is its own process (the burner is then not in its process tree, as a real
    # neighbour is not), pinned with one thread to the burner's core; a few seconds in all.
    command = [
        sys.executable, "-m", "trainscale", "run", "mnist-cnn", "--data", "synthetic",
        "--steps", "12", "--batch-size", "32", "--threads-per-worker", "1",
        "--affinity", str(burner), "--store", str(store_path), "--json",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=os.environ)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    stored = result["contention"]
    assert stored["verdict"] == BUSY, stored
    assert stored["run_cores"] == [burner]
    # The burner alone shares the core about half and half with the run's worker.
    assert stored["other_cores_busy_run_cores"] >= 0.4 > OTHER_CORES_LIMIT
    assert stored["other_cores_busy"] >= 0.4
    assert 0 < stored["wall_s"] <= time.monotonic() - started
    assert stored["num_samples"] >= 3
    # Stored, not only printed.
    with RunStore(store_path) as store:
        assert store.get_run(result["run_id"]).summary["contention"] == stored
    # One warning line after the run: why, and the figures.
    (warning,) = [line for line in done.stderr.splitlines() if "busy machine" in line]
    assert warning.startswith(f"trainscale: warning: run {result['run_id'][:8]} ran on a busy")
    assert "other processes" in warning and "machine-wide" in warning

    # The listings mark it.
    assert run_cli(["runs", "list", "--store", str(store_path)]) == 0
    assert "completed (busy)" in capsys.readouterr().out
    assert run_cli(["runs", "show", result["run_id"][:8], "--store", str(store_path)]) == 0
    shown = capsys.readouterr().out
    assert "BUSY machine: other processes used" in " ".join(shown.split())


def test_a_broken_sampler_never_fails_the_run(store_path, capsys, monkeypatch):
    def broken(self):
        raise OSError("the process table could not be read")

    monkeypatch.setattr(contention.ContentionSampler, "_sample", broken)
    code = main(
        ["run", "mnist-cnn", "--data", "synthetic", "--steps", "4", "--batch-size", "16",
         "--quiet", "--json", "--store", str(store_path)]
    )  # fmt: skip
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "completed"
    assert result["contention"]["verdict"] == UNKNOWN
    assert "the process table could not be read" in result["contention"]["reason"]
