"""Run owners and stale runs: schema 4 records who runs a run; a run whose owner is gone is
marked failed when a command that reads runs opens the store; schema 3 stores still open."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import time
from pathlib import Path

import psutil
import pytest

from trainscale.config.options import settings_hash
from trainscale.errors import StoreError
from trainscale.results.owner import (
    Owner,
    current_owner,
    decode_host,
    encode_host,
    is_alive,
    is_here,
    this_host,
    was_rebooted,
)
from trainscale.results.schema import SCHEMA_VERSION
from trainscale.results.store import RunStore

from tests.helpers.owned_runs import create_owned_run, dead_owner

V3_DUMP = Path(__file__).with_name("store_v3.sql")


def _status(path: Path, run_id: str) -> tuple[str, str | None]:
    conn = sqlite3.connect(path)  # raw SQL: opening a RunStore would itself look for stale runs
    try:
        return conn.execute("SELECT status, error FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    finally:
        conn.close()


def test_a_new_run_records_this_process_as_its_owner(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        create_owned_run(store, "mine")
        record = store.get_run("mine")
    assert record.owner == current_owner()
    assert record.owner.pid == os.getpid() and record.owner.host == this_host()
    assert is_alive(record.owner)


def test_a_run_whose_owner_is_gone_is_failed_as_stale_by_a_reader(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    dead = dead_owner()
    with RunStore(path) as store:
        create_owned_run(store, "orphan", owner=dead)
        create_owned_run(store, "alive")  # owned by this test's process
    with RunStore(path) as store:  # a plain open (a writer's) changes nothing
        assert store.get_run("orphan").status == "running"
    with RunStore(path, create=False, fail_stale=True) as store:
        orphan, alive = store.get_run("orphan"), store.get_run("alive")
    assert orphan.status == "failed" and orphan.finished_at is not None
    assert orphan.error.startswith(f"stale: owning process {dead.pid} on {dead.host} is gone")
    assert "killed" in orphan.error and "restarted" in orphan.error
    assert alive.status == "running" and alive.error is None


def test_a_reused_pid_is_not_taken_for_the_owner(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    me = current_owner()
    # The same pid, but a process that started earlier: the owner, not this process.
    earlier = Owner(me.host, me.pid, me.started - 3600.0)
    assert not is_alive(earlier)
    with RunStore(path) as store:
        create_owned_run(store, "before-restart", owner=earlier)
        assert store.fail_stale_runs() == ["before-restart"]
    status, error = _status(path, "before-restart")
    assert status == "failed" and error.startswith(f"stale: owning process {me.pid}")


def test_a_run_owned_on_another_host_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    elsewhere = Owner("node-elsewhere", 1, 0.0)  # pid 1 here is not that host's pid 1
    with RunStore(path) as store:
        create_owned_run(store, "remote", owner=elsewhere)
    with RunStore(path, fail_stale=True) as store:
        record = store.get_run("remote")
        assert store.fail_stale_runs() == []
    assert record.status == "running" and record.owner == elsewhere


def test_a_run_finished_by_its_owner_is_never_failed_as_stale(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    dead = dead_owner()
    with RunStore(path) as store:
        create_owned_run(store, "done", owner=dead)
        store.complete_run("done", {"samples_per_s": 1.0}, [], [0.1])
    with RunStore(path) as store:
        assert store.fail_stale_runs() == []
        assert store.get_run("done").status == "completed"


def test_a_store_that_cannot_be_written_still_opens_for_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    with RunStore(path) as store:
        create_owned_run(store, "orphan", owner=dead_owner())
    # Another process holds the write lock past the busy timeout: the check gives up and
    # the reader sees the run as it is.
    monkeypatch.setattr("trainscale.results.sqlite_file.BUSY_TIMEOUT_S", 0.2)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with RunStore(path, fail_stale=True) as store:
            assert store.get_run("orphan").status == "running"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    monkeypatch.undo()
    with RunStore(path, fail_stale=True) as store:
        assert store.get_run("orphan").status == "failed"


def test_a_schema_3_store_migrates_to_4_keeping_everything(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(V3_DUMP.read_text())
    conn.close()
    assert SCHEMA_VERSION == 7  # v5 to v7 changed no table: v4's columns are all there is

    with RunStore(path, fail_stale=True) as store:
        completed = store.get_run("completed-v3")
        running = store.get_run("running-v3")
        failed = store.get_run("failed-v3")
        assert completed.status == "completed" and completed.summary == {"samples_per_s": 321.0}
        assert store.step_times("completed-v3") == [0.1, 0.2, 0.3]
        assert [e["train_loss"] for e in store.epochs("completed-v3")] == [0.5]
        # Schema 7 rehashed the run's settings, and its sweep's plan followed.
        assert completed.sweep_id == "sweep-v3"
        assert completed.config_hash == settings_hash({"workload": "mnist-cnn"})
        planned = store.get_sweep("sweep-v3").plan[0]
        assert planned["label"] == "seed=0" and planned["config_hash"] == completed.config_hash
        assert store.latest_probe("matmul", host="old-host").result == {"flops_per_s": 1e9}
        assert failed.error == "worker rank 1 failed: injected"
        # An old running row has no owner: nobody can tell it is stale, so it stays.
        assert running.status == "running" and running.owner is None
        assert store.fail_stale_runs() == []
        assert completed.schema_version == 3
        # New runs in the migrated store record their owner.
        create_owned_run(store, "new-v4")
        assert store.get_run("new-v4").owner == current_owner()
    conn = sqlite3.connect(path)
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    conn.close()
    assert int(version) == SCHEMA_VERSION
    assert {"owner_host", "owner_pid", "owner_started"} <= columns


@pytest.mark.parametrize("version", [1, 2])
def test_older_schemas_still_migrate_to_the_current_one(tmp_path: Path, version: int) -> None:
    """A v3 store stripped back to what v1 / v2 wrote: every migration step still applies."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(V3_DUMP.read_text())
    conn.execute("DROP TABLE probes")
    if version == 1:
        conn.execute("DROP TABLE sweeps")
        conn.execute("DROP INDEX runs_sweep")
        for column in ("sweep_id", "sweep_item", "config_hash", "repeat_index"):
            conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.commit()
    conn.close()
    with RunStore(path) as store:
        assert store.get_run("completed-v3").summary == {"samples_per_s": 321.0}
        create_owned_run(store, "new")
        assert store.get_run("new").owner == current_owner()


def test_a_run_in_another_pid_namespace_of_this_host_is_left_alone(tmp_path: Path) -> None:
    """A container of the same host name: its pids mean other processes than ours."""
    path = tmp_path / "s.db"
    dead = dead_owner()
    me = current_owner()
    other_ns = dataclasses.replace(dead, boot_id=me.boot_id, pid_ns=(me.pid_ns or 0) + 1)
    with RunStore(path) as store:
        create_owned_run(store, "container", owner=other_ns)
    with RunStore(path, create=False, fail_stale=True) as store:
        record = store.get_run("container")
        assert store.fail_stale_runs() == []
    assert record.status == "running" and record.owner == other_ns
    assert record.owner_host == this_host()  # the stored extras do not leak into the name
    assert not is_here(other_ns)


def test_a_run_of_another_live_machine_of_the_same_name_is_left_alone(tmp_path: Path) -> None:
    """Another boot id, but a process started after this machine booted: not a restart."""
    path = tmp_path / "s.db"
    me = current_owner()
    other = Owner(me.host, 4242, time.time() - 5.0, "another-boot", me.pid_ns)
    with RunStore(path) as store:
        create_owned_run(store, "twin", owner=other)
        assert store.fail_stale_runs() == []
        assert store.get_run("twin").status == "running"


def test_a_run_from_before_this_machine_restarted_is_stale(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    me = current_owner()
    if me.boot_id is None:
        pytest.skip("no boot id on this system")
    before = Owner(me.host, me.pid, psutil.boot_time() - 3600.0, "an-earlier-boot", me.pid_ns)
    assert was_rebooted(before)
    with RunStore(path) as store:
        create_owned_run(store, "rebooted", owner=before)
        assert store.fail_stale_runs() == ["rebooted"]
    status, error = _status(path, "rebooted")
    assert status == "failed" and error.startswith("stale: owning process")


def test_the_host_column_round_trips_and_old_rows_read_as_before() -> None:
    owner = Owner("node-1", 7, 1.0, "b00t", 4026531836)
    assert encode_host(owner) == "node-1 boot=b00t pidns=4026531836"
    assert decode_host(encode_host(owner)) == ("node-1", "b00t", 4026531836)
    assert decode_host("node-1") == ("node-1", None, None)
    assert decode_host("node-1 pidns=x what=ever") == ("node-1", None, None)


def test_a_run_failed_as_stale_is_completed_by_its_real_result(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with RunStore(path) as store:
        create_owned_run(store, "late", owner=dead_owner())
        assert store.fail_stale_runs() == ["late"]
        store.complete_run("late", {"samples_per_s": 2.0}, [{"train_loss": 0.5}], [0.1, 0.2])
        record = store.get_run("late")
        assert record.status == "completed" and record.error is None
        assert record.summary == {"samples_per_s": 2.0} and store.step_times("late") == [0.1, 0.2]


def test_a_run_failed_as_stale_takes_its_owners_reason(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with RunStore(path) as store:
        create_owned_run(store, "late", owner=dead_owner())
        assert store.fail_stale_runs() == ["late"]
        assert store.fail_run("late", "worker rank 0 failed: boom")
        assert store.get_run("late").error == "worker rank 0 failed: boom"
        # A real reason is kept, as before: the first is the root cause.
        assert not store.fail_run("late", "the launcher saw the worker exit")
        create_owned_run(store, "truly-failed")
        store.fail_run("truly-failed", "out of memory")
        with pytest.raises(StoreError, match="already failed; it cannot be completed"):
            store.complete_run("truly-failed", {}, [], [])
