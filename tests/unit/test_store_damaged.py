"""Rows whose stored JSON is damaged: listings leave them out and name them, asking for one
by id is one clear error, and nothing else in the store is hidden by them."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from trainscale.errors import StoreError
from trainscale.results.records import DamagedRecordError, DamagedRow
from trainscale.results.store import RunStore

OLD, DAMAGED, NEW = ("a" * 32, "b" * 32, "c" * 32)
SWEEP_OLD, SWEEP_NEW = "1" * 32, "2" * 32


def damage(path: Path, table: str, column: str, ident: str, value: Any = "{broken") -> None:
    """Overwrite one JSON cell behind the store's back, as a hand edit or a bad disk would."""
    id_column = {"runs": "run_id", "sweeps": "sweep_id", "probes": "probe_id"}[table]
    with sqlite3.connect(path) as conn:
        changed = conn.execute(
            f"UPDATE {table} SET {column} = ? WHERE {id_column} = ?", (value, ident)
        ).rowcount
    conn.close()
    assert changed == 1


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """Three completed runs of one sweep (oldest first), two sweeps, two matmul probes."""
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        store.create_sweep(SWEEP_OLD, "old", "old.toml", "h1", {}, [{"label": "x"}])
        store.create_sweep(SWEEP_NEW, "new", "new.toml", "h2", {}, [{"label": "y"}])
        for item, rid in enumerate((OLD, DAMAGED, NEW)):
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
                sweep_id=SWEEP_NEW,
                sweep_item=item,
            )
            store.complete_run(rid, {"samples_per_s": 100.0 + item}, [], [0.1])
        for gflops in (1.0, 2.0):
            store.add_probe(
                "matmul", {"gflops": gflops}, {}, host="h", device_type="cpu", device="Test CPU"
            )
    return path


@pytest.mark.parametrize("column", ["config_json", "env_json", "summary_json"])
def test_listings_leave_a_damaged_run_out_and_name_it(
    store_path: Path, column: str, caplog: pytest.LogCaptureFixture
) -> None:
    damage(store_path, "runs", column, DAMAGED)
    with caplog.at_level(logging.WARNING, logger="trainscale"), RunStore(store_path) as store:
        assert [r.run_id for r in store.list_runs()] == [NEW, OLD]
        assert [r.run_id for r in store.sweep_runs(SWEEP_NEW)] == [OLD, NEW]
        # A second listing does not warn again: one line per damaged run.
        store.list_runs(status="completed")
        assert store.left_out == [DamagedRow("run", DAMAGED, (column,))]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"run bbbbbbbb has damaged stored JSON ({column}); left out"]


def test_limit_counts_readable_runs_only(store_path: Path) -> None:
    damage(store_path, "runs", "config_json", NEW)  # the newest
    with RunStore(store_path) as store:
        assert [r.run_id for r in store.list_runs(limit=1)] == [DAMAGED]
        assert [r.run_id for r in store.list_runs(limit=2)] == [DAMAGED, OLD]


def test_asking_for_a_damaged_run_by_id_is_one_clear_error(store_path: Path) -> None:
    damage(store_path, "runs", "config_json", DAMAGED)
    damage(store_path, "runs", "summary_json", DAMAGED, "[1, 2")
    with RunStore(store_path) as store:
        for ident in (DAMAGED, "bbbb"):  # full id and unique prefix
            with pytest.raises(DamagedRecordError) as info:
                store.get_run(ident)
            assert isinstance(info.value, StoreError)  # the CLI's one-line error, exit 2
            assert str(info.value) == (
                f"run {DAMAGED} has damaged stored JSON (config_json, summary_json); "
                "it cannot be read"
            )
        assert store.get_run(OLD).config == {"lr": 0.1}


@pytest.mark.parametrize(
    "value",
    [b"\xff\xfe{", b"\x80abc", "[" * 100_000, '{"a": 1'],
    ids=["binary-bom", "binary-not-utf8", "absurdly-nested", "cut-short"],
)
def test_every_kind_of_damage_is_caught(store_path: Path, value: Any) -> None:
    damage(store_path, "runs", "env_json", DAMAGED, value)
    with RunStore(store_path) as store:
        assert [r.run_id for r in store.list_runs()] == [NEW, OLD]
        with pytest.raises(DamagedRecordError):
            store.get_run(DAMAGED)


@pytest.mark.parametrize(
    ("column", "value"),
    [("plan_json", "{broken"), ("plan_json", '{"not": "a list"}'), ("spec_json", "{")],
)
def test_damaged_sweep(store_path: Path, column: str, value: str) -> None:
    damage(store_path, "sweeps", column, SWEEP_NEW, value)
    with RunStore(store_path) as store:
        assert [s.sweep_id for s in store.list_sweeps()] == [SWEEP_OLD]
        assert store.left_out == [DamagedRow("sweep", SWEEP_NEW, (column,))]
        with pytest.raises(DamagedRecordError, match=f"sweep {SWEEP_NEW} has damaged"):
            store.get_sweep("2222")
        assert store.get_sweep(SWEEP_OLD).plan == [{"label": "x"}]


def test_latest_probe_skips_a_damaged_newest_probe(store_path: Path) -> None:
    with RunStore(store_path) as store:
        newest = store.latest_probe("matmul", host="h")
        assert newest is not None and newest.result == {"gflops": 2.0}
    damage(store_path, "probes", "result_json", newest.probe_id)
    with RunStore(store_path) as store:
        probe = store.latest_probe("matmul", host="h")
        assert probe is not None and probe.result == {"gflops": 1.0}
        assert [p.result for p in store.list_probes()] == [{"gflops": 1.0}]
        assert store.left_out == [DamagedRow("probe", newest.probe_id, ("result_json",))]


def test_sweep_progress_counts_completed_planned_runs(store_path: Path) -> None:
    with RunStore(store_path) as store:
        assert store.sweep_progress() == {SWEEP_NEW: 3}
