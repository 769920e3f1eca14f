"""The SQLite results store: lifecycle of a run, lookups, atomicity, concurrency, bad paths."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from trainscale.errors import StoreError
from trainscale.results import sqlite_file
from trainscale.results.records import RunRecord
from trainscale.results.schema import SCHEMA_VERSION
from trainscale.results.store import RunStore, default_store_path
from trainscale.runner.launch import record_failure

SUMMARY = {
    "samples_per_s": 1234.5,
    "step_time_s_median": 0.05,
    "step_time_s_p90": 0.06,
    "epoch_time_s": 10.0,
    "time_to_target_s": 25.0,
    "target_accuracy": 0.99,
    "test_accuracy": 0.991,
    "test_loss": 0.03,
    "peak_memory_bytes_per_worker": [100, 200],
}
EPOCHS = [
    {"epoch": 1, "train_loss": 0.5, "test_loss": 0.1, "test_accuracy": 0.97, "epoch_time_s": 10.0},
    {"epoch": 2, "train_loss": 0.2, "test_loss": 0.03, "test_accuracy": 0.991, "eval_time_s": 1.0},
]


def _create(store: RunStore, run_id: str, workload: str = "mnist_cnn", **overrides) -> None:
    options = {
        "data_kind": "real",
        "world_size": 2,
        "threads_per_worker": 1,
        "affinity": "compact",
        "precision": "fp32",
        "global_batch_size": 128,
        "tag": None,
    }
    options.update(overrides)
    store.create_run(
        run_id, workload, {"lr": 0.1, "nested": {"a": 1}}, {"cpu_model": "X"}, **options
    )


@pytest.fixture
def store(tmp_path: Path):
    with RunStore(tmp_path / "runs.db") as opened:
        yield opened


def test_default_store_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    assert default_store_path() == Path("trainscale.db")
    monkeypatch.setenv("TRAINSCALE_STORE", str(tmp_path / "x.db"))
    assert default_store_path() == tmp_path / "x.db"


def test_open_sets_wal_and_schema_version(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db"):
        pass
    conn = sqlite3.connect(tmp_path / "runs.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert int(version) == SCHEMA_VERSION
    conn.close()


def test_create_then_complete(store: RunStore) -> None:
    _create(store, "run-aaaa", tag="sweep")
    running = store.get_run("run-aaaa")
    assert running.status == "running"
    assert running.finished_at is None
    assert running.summary == {}

    store.complete_run("run-aaaa", SUMMARY, EPOCHS, [0.05, 0.06, 0.04])
    record = store.get_run("run-aaaa")
    assert isinstance(record, RunRecord)
    assert record.status == "completed"
    assert record.finished_at is not None
    assert record.finished_at >= record.created_at
    assert record.summary == SUMMARY
    assert record.config == {"lr": 0.1, "nested": {"a": 1}}
    assert record.env == {"cpu_model": "X"}
    assert (record.workload, record.data_kind, record.world_size) == ("mnist_cnn", "real", 2)
    assert (record.threads_per_worker, record.affinity, record.precision) == (1, "compact", "fp32")
    assert (record.global_batch_size, record.tag) == (128, "sweep")
    assert record.schema_version == SCHEMA_VERSION
    assert record.short_id == "run-aaaa"

    epochs = store.epochs("run-aaaa")
    assert [e["epoch"] for e in epochs] == [1, 2]
    assert epochs[0]["test_accuracy"] == 0.97
    assert epochs[0]["eval_time_s"] is None
    assert epochs[1]["eval_time_s"] == 1.0
    assert store.step_times("run-aaaa") == [0.05, 0.06, 0.04]


def test_complete_converts_numpy_like_values(store: RunStore) -> None:
    np = pytest.importorskip("numpy")
    _create(store, "np-run")
    store.complete_run(
        "np-run",
        {"samples_per_s": np.float32(2.5), "peak_memory_bytes_per_worker": np.array([1, 2])},
        [{"train_loss": np.float32(0.5)}],
        [np.float64(0.1)],
    )
    record = store.get_run("np-run")
    assert record.summary == {"samples_per_s": 2.5, "peak_memory_bytes_per_worker": [1, 2]}
    # Without an explicit number, epochs are numbered by position from 1.
    assert store.epochs("np-run")[0]["epoch"] == 1


def test_duplicate_run_id_refused(store: RunStore) -> None:
    _create(store, "dup")
    with pytest.raises(StoreError, match="already exists"):
        _create(store, "dup")


def test_complete_unknown_or_finished_run_refused(store: RunStore) -> None:
    with pytest.raises(StoreError, match="no run"):
        store.complete_run("ghost", SUMMARY, [], [])
    _create(store, "done")
    store.complete_run("done", SUMMARY, EPOCHS, [0.1])
    with pytest.raises(StoreError, match="already completed"):
        store.complete_run("done", SUMMARY, EPOCHS, [0.1])


def test_fail_running_run(store: RunStore) -> None:
    _create(store, "boom")
    assert store.fail_run("boom", "worker 1 exited with code 1") is True
    record = store.get_run("boom")
    assert record.status == "failed"
    assert record.error == "worker 1 exited with code 1"
    assert record.finished_at is not None


def test_fail_after_complete_does_not_overwrite(store: RunStore) -> None:
    _create(store, "good")
    store.complete_run("good", SUMMARY, EPOCHS, [0.1, 0.2])
    assert store.fail_run("good", "late failure") is False
    record = store.get_run("good")
    assert record.status == "completed"
    assert record.error is None
    assert record.summary == SUMMARY
    assert len(store.epochs("good")) == 2


def test_fail_keeps_first_reason(store: RunStore) -> None:
    _create(store, "twice")
    store.fail_run("twice", "root cause")
    assert store.fail_run("twice", "echo of the root cause") is False
    assert store.get_run("twice").error == "root cause"


def test_fail_unknown_run_inserts_minimal_row(store: RunStore) -> None:
    assert store.fail_run("early", "config invalid", workload="bilstm", world_size=4) is True
    record = store.get_run("early")
    assert record.status == "failed"
    assert record.error == "config invalid"
    assert record.workload == "bilstm"
    assert record.world_size == 4
    assert record.data_kind is None
    assert record.config == {} and record.env == {} and record.summary == {}


def test_get_by_unique_prefix(store: RunStore) -> None:
    _create(store, "abc123")
    _create(store, "abd456")
    assert store.get_run("abc").run_id == "abc123"
    assert store.get_run("abd4").run_id == "abd456"
    # An exact id wins even when it is also a prefix of another id.
    _create(store, "abc")
    assert store.get_run("abc").run_id == "abc"


def test_ambiguous_prefix(store: RunStore) -> None:
    _create(store, "abc123")
    _create(store, "abd456")
    with pytest.raises(StoreError, match="matches 2 runs") as info:
        store.get_run("ab")
    message = str(info.value)
    assert "abc123" in message and "abd456" in message
    assert "more characters" in message
    assert "\n" not in message


def test_missing_run(store: RunStore) -> None:
    _create(store, "abc123")
    with pytest.raises(StoreError, match="no run 'zzz'") as info:
        store.get_run("zzz")
    assert "trainscale runs list" in str(info.value)
    with pytest.raises(StoreError, match="empty run id"):
        store.get_run("  ")


def test_prefix_with_like_wildcards_is_literal(store: RunStore) -> None:
    _create(store, "a_b-1")
    _create(store, "axb-2")
    assert store.get_run("a_").run_id == "a_b-1"
    with pytest.raises(StoreError, match="no run"):
        store.get_run("a%")


def test_list_runs_newest_first_and_filters(store: RunStore) -> None:
    _create(store, "r1", workload="mnist_cnn", tag="t1")
    _create(store, "r2", workload="resnet44", tag="t1")
    _create(store, "r3", workload="mnist_cnn", tag="t2")
    store.complete_run("r1", SUMMARY, [], [])
    store.fail_run("r2", "oops")

    assert [r.run_id for r in store.list_runs()] == ["r3", "r2", "r1"]
    assert [r.run_id for r in store.list_runs(workload="mnist_cnn")] == ["r3", "r1"]
    assert [r.run_id for r in store.list_runs(status="failed")] == ["r2"]
    assert [r.run_id for r in store.list_runs(tag="t1")] == ["r2", "r1"]
    assert [r.run_id for r in store.list_runs(workload="mnist_cnn", tag="t1")] == ["r1"]
    assert [r.run_id for r in store.list_runs(limit=2)] == ["r3", "r2"]
    assert store.list_runs(workload="nope") == []
    with pytest.raises(ValueError):
        store.list_runs(status="done")
    with pytest.raises(ValueError):
        store.list_runs(limit=0)


def test_invalid_data_kind_rejected(store: RunStore) -> None:
    with pytest.raises(ValueError, match="data_kind"):
        _create(store, "x", data_kind="fake")


def test_complete_is_atomic(store: RunStore) -> None:
    _create(store, "atomic")
    # NaN passes float() but is bound as NULL, which step_time_s refuses: the error comes
    # from SQLite inside the transaction, after the epochs and earlier steps were inserted.
    with pytest.raises(sqlite3.IntegrityError):
        store.complete_run("atomic", SUMMARY, EPOCHS, [0.1, 0.2, float("nan")])
    record = store.get_run("atomic")
    assert record.status == "running"
    assert record.finished_at is None
    assert record.summary == {}
    assert store.epochs("atomic") == []
    assert store.step_times("atomic") == []
    # The connection is usable afterwards and the run can still complete.
    store.complete_run("atomic", SUMMARY, EPOCHS, [0.1, 0.2])
    assert store.get_run("atomic").status == "completed"


def test_bad_value_fails_before_writing(store: RunStore) -> None:
    _create(store, "bad")
    with pytest.raises(ValueError):
        store.complete_run("bad", SUMMARY, EPOCHS, [0.1, "not a number"])
    with pytest.raises(TypeError):
        store.complete_run("bad", {"x": object()}, EPOCHS, [0.1])
    assert store.get_run("bad").status == "running"
    assert store.epochs("bad") == [] and store.step_times("bad") == []


def test_newer_schema_version_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with RunStore(path):
        pass
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    conn.close()
    with pytest.raises(StoreError, match="written by a newer trainscale") as info:
        RunStore(path)
    assert str(path) in str(info.value)


def test_reopen_keeps_runs(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with RunStore(path) as first:
        _create(first, "keep")
    with RunStore(path, create=False) as second:
        assert second.get_run("keep").status == "running"


def test_missing_store_without_create(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    with pytest.raises(StoreError, match="no results store at") as info:
        RunStore(path, create=False)
    assert str(path) in str(info.value)
    assert not path.exists()


@pytest.mark.parametrize("kind", ["missing_dir", "directory", "not_sqlite", "foreign_sqlite"])
def test_unusable_path_is_store_error(tmp_path: Path, kind: str) -> None:
    if kind == "missing_dir":
        path = tmp_path / "no" / "such" / "dir" / "runs.db"
    elif kind == "directory":
        path = tmp_path / "adir"
        path.mkdir()
    elif kind == "not_sqlite":
        path = tmp_path / "notes.db"
        path.write_text("this is not a database, just some text that is long enough " * 20)
    else:
        path = tmp_path / "other.db"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE customers (id INTEGER)")
        conn.commit()
        conn.close()
    with pytest.raises(StoreError) as info:
        RunStore(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores directory permissions"
)
def test_read_only_directory_is_store_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(StoreError) as info:
            RunStore(locked / "runs.db")
        assert str(locked / "runs.db") in str(info.value)
    finally:
        locked.chmod(0o700)


def test_closed_store_is_store_error(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    store.close()
    store.close()  # twice is harmless
    with pytest.raises(StoreError, match="closed"):
        store.list_runs()


# -- several processes writing at once ------------------------------------------------------

RUNS_PER_WRITER = 50
STEPS_PER_RUN = 20


def _writer(path: str, writer: int, start: multiprocessing.synchronize.Event) -> None:
    """Child process: open the store and write RUNS_PER_WRITER complete runs."""
    start.wait(30)
    with RunStore(path) as store:
        for index in range(RUNS_PER_WRITER):
            run_id = f"w{writer}-{index:03d}"
            _create(store, run_id, tag=f"writer{writer}")
            epochs = [{"epoch": e, "train_loss": 1.0 / e, "test_accuracy": 0.9} for e in (1, 2, 3)]
            steps = [0.001 * (step + 1) for step in range(STEPS_PER_RUN)]
            store.complete_run(run_id, {"samples_per_s": float(index)}, epochs, steps)


def test_concurrent_writer_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    # Both children create the (not yet existing) store themselves, racing on the schema too.
    processes = [context.Process(target=_writer, args=(path, w, start)) for w in (0, 1)]
    for process in processes:
        process.start()
    start.set()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0, 0]

    with RunStore(path, create=False) as store:
        runs = store.list_runs()
        assert len(runs) == 2 * RUNS_PER_WRITER
        assert {r.status for r in runs} == {"completed"}
        for writer in (0, 1):
            assert len(store.list_runs(tag=f"writer{writer}")) == RUNS_PER_WRITER
        for record in runs:
            assert len(store.epochs(record.run_id)) == 3
            assert len(store.step_times(record.run_id)) == STEPS_PER_RUN
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM epochs").fetchone()[0] == 2 * RUNS_PER_WRITER * 3
    total_steps = conn.execute("SELECT count(*) FROM step_times").fetchone()[0]
    assert total_steps == 2 * RUNS_PER_WRITER * STEPS_PER_RUN
    conn.close()


# -- the store file deleted or replaced while a run has it open ----------------------------


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_result_whose_store_went_away_is_saved_in_a_copy(tmp_path: Path, how: str) -> None:
    """The worker holds the store open for the whole run; meanwhile the file is removed (or
    another put in its place). Its result must not go into the unlinked file, nor a new
    empty store appear at the path: it is saved in a copy that names the run."""
    path = tmp_path / "runs.db"
    other = tmp_path / "other.db"
    store = RunStore(path)
    _create(store, "run-a")
    for file in tmp_path.glob("runs.db*"):  # `rm runs.db*`: the -wal and -shm go too
        file.unlink()
    if how == "replaced":
        RunStore(other).close()
        os.replace(other, path)
    with pytest.raises(StoreError, match=f"was {how}.*result was saved to") as raised:
        store.complete_run("run-a", {"samples_per_s": 9.5}, [{"train_loss": 0.1}], [0.2, 0.3])
    store.close()
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    saved = Path(message.split("saved to ")[1].split(" instead")[0])
    assert saved.parent == tmp_path and saved.exists()
    with RunStore(saved, create=False) as copy:
        record = copy.get_run("run-a")
        assert record.status == "completed" and record.summary == {"samples_per_s": 9.5}
        assert copy.step_times("run-a") == [0.2, 0.3]
    if how == "deleted":
        assert not path.exists()  # no empty store made in its place
    else:
        with RunStore(path, create=False) as replacement:
            assert replacement.list_runs() == []


def test_any_write_to_a_deleted_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        _create(store, "run-a")
        path.unlink()
        with pytest.raises(StoreError, match=f"cannot write results store {path}: .*deleted"):
            store.fail_run("run-a", "boom")
    assert not path.exists()


def test_recording_a_failure_never_recreates_a_deleted_store(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        _create(store, "run-a")
    for leftover in tmp_path.glob("runs.db*"):
        leftover.unlink()
    reason = record_failure(path, "run-a", "worker failed")
    assert reason is not None and "gone" in reason
    assert not path.exists()


def test_recording_a_failure_makes_no_row_in_a_store_that_replaced_the_runs(tmp_path) -> None:
    # A failed row made up there would shadow the completed one of the run's saved copy
    # when that copy is imported (an import keeps the rows a store already holds).
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        _create(store, "run-a")
    replacement = tmp_path / "other.db"
    with RunStore(replacement) as store:
        _create(store, "run-b")
    replacement.replace(path)
    reason = record_failure(path, "run-a", "worker failed")
    assert reason is not None and "the store was replaced while the run ran" in reason
    with RunStore(path) as store:
        assert [r.run_id for r in store.list_runs()] == ["run-b"]


@pytest.mark.parametrize("create", [True, False])
def test_a_device_or_fifo_is_no_store(tmp_path: Path, create: bool) -> None:
    # SQLite failed on them as a "disk I/O error" and left a journal beside /dev/null.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (Path("/dev/null"), fifo):
        with pytest.raises(StoreError, match=f"results store {path}: it is not a regular file"):
            RunStore(path, create=create)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_a_result_the_store_refuses_is_kept_in_a_copy_that_import_brings_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Locked past the busy timeout here; a full disk or a read-only file refuse alike.
    monkeypatch.setattr(sqlite_file, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        _create(store, "run-a")
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer that does not let go
        with pytest.raises(StoreError) as refused:
            store.complete_run("run-a", {"samples_per_s": 5.0}, [{"train_loss": 0.3}], [0.1])
        holder.execute("ROLLBACK")
        holder.close()
    message = str(refused.value)
    assert message.startswith(f"cannot write results store {path}: database is locked")
    saved = Path(message.split("was saved to ")[1].split(" instead")[0])
    with RunStore(saved, create=False) as copy:
        kept = copy.get_run("run-a")
        assert kept.status == "completed" and kept.summary["samples_per_s"] == 5.0
    # Once the store can be written the run is marked failed (its owner gone), and
    # importing the copy puts the completed run in its place, epochs and step times too.
    with RunStore(path) as store:
        store.fail_run("run-a", "stale: owning process gone")
        imported = store.import_from(saved)
        assert (imported.runs, imported.completed_failed, imported.already_there) == (1, 1, 0)
        restored = store.get_run("run-a")
        assert restored.status == "completed" and store.step_times("run-a") == [0.1]


def test_a_failure_reason_of_megabytes_is_stored_cut(store: RunStore) -> None:
    # A workload that put a whole tensor in its message: one line of megabytes everywhere.
    _create(store, "run-big")
    store.fail_run("run-big", "RuntimeError: " + "x" * 3_000_000)
    error = store.get_run("run-big").error
    assert error is not None and len(error) < 2_100
    assert error.startswith("RuntimeError: xxx") and error.endswith("more characters cut)")
