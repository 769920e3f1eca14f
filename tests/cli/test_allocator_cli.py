"""A real run's workers start with the allocator settings, and say so in their stored facts."""

from __future__ import annotations

import platform

import pytest

from trainscale.parallel.allocator import SETTINGS
from trainscale.results.store import RunStore

from tests.helpers.cli import run_cli

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")


@pytest.mark.parametrize(
    ("user_env", "expected"),
    [({}, SETTINGS), ({"MALLOC_ARENA_MAX": "2"}, {"MALLOC_ARENA_MAX": "2"})],
    ids=["trainscale-settings", "users-own-setting-untouched"],
)
def test_workers_run_with_the_allocator_settings(tmp_path, monkeypatch, user_env, expected):
    for name in [*SETTINGS, "GLIBC_TUNABLES", "LD_PRELOAD"]:
        monkeypatch.delenv(name, raising=False)
    for name, value in user_env.items():
        monkeypatch.setenv(name, value)
    store = tmp_path / "runs.db"
    args = ["run", "mnist-cnn", "--data", "synthetic", "--steps", "2", "--no-eval"]
    assert run_cli([*args, "--batch-size", "16", "--quiet", "--store", str(store)]) == 0
    with RunStore(store) as opened:
        (record,) = opened.list_runs()
    (worker,) = record.summary["workers"]
    assert worker["allocator"] == expected
