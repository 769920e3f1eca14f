"""A reader that stops early (`| head -1`) ends trainscale quietly: no traceback, exit 141."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainscale.cli import EXIT_BROKEN_PIPE
from trainscale.results.store import RunStore

TRAINSCALE = [sys.executable, "-m", "trainscale"]


@pytest.fixture
def big_store(tmp_path: Path) -> Path:
    """Two runs whose export is far larger than a pipe's buffer, so a writer must block
    and then find the reader gone, whatever the timing."""
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        for n in range(2):
            rid = f"{n}" * 32
            store.create_run(
                rid,
                "mnist-cnn",
                {"lr": 0.1},
                {"cpu_model": "Test CPU"},
                data_kind="synthetic",
                world_size=1,
                threads_per_worker=1,
                affinity="compact",
                precision="fp32",
                global_batch_size=64,
                tag="t" * 300_000,
            )
            store.complete_run(rid, {"samples_per_s": 100.0}, [], [0.1])
    return path


def test_export_csv_into_head(big_store: Path, tmp_path: Path) -> None:
    export = subprocess.Popen(
        [*TRAINSCALE, "runs", "export", "--format", "csv", "--store", str(big_store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    head = subprocess.Popen(["head", "-1"], stdin=export.stdout, stdout=subprocess.PIPE)
    assert export.stdout is not None and export.stderr is not None
    export.stdout.close()  # only head reads it now, as in a shell pipeline
    first, _ = head.communicate(timeout=120)
    err = export.stderr.read().decode()
    assert export.wait(timeout=120) == EXIT_BROKEN_PIPE == 141
    assert first.decode().startswith("run_id,created_at,")
    assert err == ""  # no traceback, no "Exception ignored" at interpreter exit


@pytest.mark.parametrize(
    "args", [["runs", "list"], ["runs", "export", "--format", "json"]], ids=["list", "json"]
)
def test_reader_gone_before_the_first_write(
    big_store: Path, tmp_path: Path, args: list[str]
) -> None:
    proc = subprocess.Popen(
        [*TRAINSCALE, *args, "--store", str(big_store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before trainscale has even started
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert err == ""


@pytest.mark.parametrize(
    "args",
    [
        ["workloads"],
        ["recipes"],
        ["simulate", "--list-clusters"],
        ["simulate", "mnist-cnn", "--cluster", "v100-nvlink-ib", "--workers", "1,2"],
    ],
    ids=["workloads", "recipes", "clusters", "simulate"],
)
def test_a_table_for_a_reader_gone_ends_like_any_output(tmp_path: Path, args: list[str]) -> None:
    """Tables are printed by rich, which on a broken pipe exits with status 1 of its own
    accord: trainscale's tables end like its other output, 141 and not a word."""
    proc = subprocess.Popen(
        [*TRAINSCALE, *args, "--store", str(tmp_path / "none.db")]
        if args[0] == "simulate" and "--list-clusters" not in args
        else [*TRAINSCALE, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert err == ""
