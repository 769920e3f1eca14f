"""Run `trainscale run` on a store whose disk fills up mid-run; print what happened as JSON.

Meant to run as root in a private mount namespace (`unshare --mount`): it mounts a small
tmpfs at DIR, so the full disk is real and nobody else sees it. Steps: start the run with
its store in DIR, wait until the row is 'running', fill DIR to the last byte, wait for the
run to end; then free the space and run `trainscale runs list` (a command that reads runs).

usage: python full_disk_driver.py DIR SIZE_KB STEPS
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil


def row(store: Path) -> tuple[str, str | None] | None:
    try:
        conn = sqlite3.connect(store, timeout=5)
        try:
            found = conn.execute("SELECT status, error FROM runs").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None  # not created yet
    return found[0] if found else None


def worker_has_open(run: subprocess.Popen, store: Path) -> bool:
    """Whether a worker of the run (rank 0) has opened the store: it is writing there next."""
    for child in psutil.Process(run.pid).children(recursive=True):
        try:
            if any(f.path == str(store) for f in child.open_files()):
                return True
        except psutil.Error:
            continue
    return False


def fill(folder: Path) -> Path:
    """Write a file until the file system has no byte left."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 16, 1 << 12, 1 << 9, 1):
            try:
                while True:
                    out.write(b"\0" * chunk)
            except OSError:
                continue
    return filler


def main() -> None:
    folder, size_kb, steps = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)], check=True
    )
    store = folder / "s.db"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainscale",
            "run",
            "mnist-cnn",
            "--data",
            "synthetic",
            "--steps",
            steps,
            "--no-eval",
            "--batch-size",
            "8",
            "--threads-per-worker",
            "1",
            "--store",
            str(store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (row(store) == ("running", None) and worker_has_open(run, store)):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.05)
    filler = fill(folder)
    out, err = run.communicate(timeout=300)
    full = {
        "code": run.returncode,
        "stdout": out,
        "stderr": err,
        "row": row(store),
        "parent_pid": run.pid,
    }
    filler.unlink()  # the space is back
    listed = subprocess.run(
        [sys.executable, "-m", "trainscale", "runs", "list", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    after = {
        "code": listed.returncode,
        "stdout": listed.stdout,
        "stderr": listed.stderr,
        "row": row(store),
    }
    print(json.dumps({"full": full, "after": after, "host": os.uname().nodename}))


if __name__ == "__main__":
    main()
