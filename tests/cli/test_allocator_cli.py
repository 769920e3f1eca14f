"""A real run's workers start with the allocator settings, and say so in their stored facts."""

from __future__ import annotations

import platform

import pytest

from trainscale.parallel.allocator import SETTINGS
from trainscale.results.store import RunStore

from tests.helpers.cli import run_cli

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")


def test_workers_run_with_the_allocator_settings(tmp_path, monkeypatch):
    for name in [*SETTINGS, "GLIBC_TUNABLES", "LD_PRELOAD"]:
        monkeypatch.delenv(name, raising=False)
    store = tmp_path / "runs.db"
    args = ["run", "mnist-cnn", "--data", "synthetic", "--steps", "2", "--no-eval"]
    assert run_cli([*args, "--batch-size", "16", "--quiet", "--store", str(store)]) == 0
    with RunStore(store) as opened:
        (record,) = opened.list_runs()
    (worker,) = record.summary["workers"]
    assert worker["allocator"] == SETTINGS


def test_a_users_allocator_setting_reaches_the_workers_untouched(tmp_path, monkeypatch):
    for name in [*SETTINGS, "GLIBC_TUNABLES", "LD_PRELOAD"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    store = tmp_path / "runs.db"
    args = ["run", "mnist-cnn", "--data", "synthetic", "--steps", "2", "--no-eval"]
    assert run_cli([*args, "--batch-size", "16", "--quiet", "--store", str(store)]) == 0
    with RunStore(store) as opened:
        (record,) = opened.list_runs()
    (worker,) = record.summary["workers"]
    assert worker["allocator"] == {"MALLOC_ARENA_MAX": "2"}
