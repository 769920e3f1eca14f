"""`RunStore.import_from` (`trainscale runs import`): another store's ended runs, sweeps and
probes copied as stored, nothing twice, running runs left out, all or nothing, the source
never written."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from trainscale.cli import main
from trainscale.errors import StoreError
from trainscale.results import store_import
from trainscale.results.schema import SCHEMA_VERSION
from trainscale.results.store import RunStore

from tests.helpers.stored_runs import add_run

V3_DUMP = Path(__file__).with_name("store_v3.sql")


def _run(store: RunStore, run_id: str, *, sweep_id: str | None = None) -> None:
    in_sweep = {"sweep_id": sweep_id, "sweep_item": 0, "repeat_index": 0} if sweep_id else {}
    add_run(store, run_id, env={"hostname": "laptop", "cpu_model": "c"}, **in_sweep)


def _source(path: Path) -> Path:
    """A store with a sweep, a completed run of it (epochs, step times), a failed run, a
    running run and a probe."""
    with RunStore(path) as store:
        store.create_sweep("5weep0000000", "grid", "tests", "h", {"name": "grid"}, [])
        _run(store, "d0ne00000001", sweep_id="5weep0000000")
        store.complete_run(
            "d0ne00000001",
            {"samples_per_s": 100.0},
            [{"train_loss": 0.5, "test_accuracy": 0.9}],
            [0.1, 0.2, 0.3],
        )
        _run(store, "fa11ed000001")
        store.fail_run("fa11ed000001", "DataError: MNIST files not found")
        _run(store, "b05y00000001")  # still running
        store.add_probe("matmul", {"fp32": 1e9}, {}, host="laptop", device_type="cpu", device="c")
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_ended_runs_sweeps_and_probes_are_copied_as_stored(tmp_path):
    source = _source(tmp_path / "laptop.db")
    with RunStore(tmp_path / "here.db") as store:
        _run(store, "here00000001")
        imported = store.import_from(source)
        assert (imported.runs, imported.sweeps, imported.probes) == (2, 1, 1)
        assert (imported.already_there, imported.still_running) == (0, 1)
        assert {r.run_id for r in store.list_runs()} == {
            "here00000001",
            "d0ne00000001",
            "fa11ed000001",
        }
        done = store.get_run("d0ne00000001")
        assert done.status == "completed" and done.summary["samples_per_s"] == 100.0
        assert done.sweep_id == "5weep0000000" and done.machine.hostname == "laptop"
        assert store.step_times("d0ne00000001") == [0.1, 0.2, 0.3]
        assert [e["test_accuracy"] for e in store.epochs("d0ne00000001")] == [0.9]
        assert store.get_run("fa11ed000001").error == "DataError: MNIST files not found"
        assert [s.sweep_id for s in store.list_sweeps()] == ["5weep0000000"]
        assert [p.host for p in store.list_probes()] == ["laptop"]


def test_importing_twice_copies_nothing_twice_and_keeps_the_store_s_own_rows(tmp_path):
    source = _source(tmp_path / "laptop.db")
    with RunStore(tmp_path / "here.db") as store:
        _run(store, "d0ne00000001")  # the same id, running here: this store's row stays
        first = store.import_from(source)
        second = store.import_from(source)
        assert (first.runs, first.already_there) == (1, 1)
        assert (second.runs, second.sweeps, second.probes, second.already_there) == (0, 0, 0, 2)
        assert store.get_run("d0ne00000001").status == "running"
        assert store.step_times("d0ne00000001") == []
        assert len(store.list_runs()) == 2 and len(store.list_probes()) == 1


def test_a_store_of_an_older_trainscale_is_imported_and_left_unwritten(tmp_path):
    old = tmp_path / "v3.db"
    conn = sqlite3.connect(old)
    conn.executescript(V3_DUMP.read_text())
    conn.close()
    before = _digest(old)
    with RunStore(tmp_path / "here.db") as store:
        imported = store.import_from(old)
        assert imported.runs == 2 and imported.still_running == 1  # completed-v3, failed-v3
        assert store.step_times("completed-v3") == [0.1, 0.2, 0.3]
        assert store.get_run("completed-v3").summary == {"samples_per_s": 321.0}
    assert _digest(old) == before


def test_a_failure_halfway_copies_nothing(tmp_path, monkeypatch):
    source = _source(tmp_path / "laptop.db")
    columns = store_import._columns

    def failing(conn, table):  # the step times are the last rows copied
        if table == "step_times":
            raise sqlite3.OperationalError("disk I/O error")
        return columns(conn, table)

    monkeypatch.setattr(store_import, "_columns", failing)
    here = tmp_path / "here.db"
    with pytest.raises(StoreError, match="disk I/O error"), RunStore(here) as store:
        store.import_from(source)
    with RunStore(here) as store:
        assert store.list_runs() == [] and store.list_sweeps() == [] and not store.list_probes()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: d / "missing.db", "no such file"),
        (lambda d: d, "it is a directory"),
        (lambda d: _text(d / "notes.txt"), "it is not a trainscale results store"),
        (lambda d: d / "here.db", "it is the store being imported into"),
        (lambda d: _newer(d / "newer.db"), "written by a newer trainscale"),
        (lambda d: _marked(d / "marked.db", "abc"), "unreadable schema_version 'abc'"),
        (lambda d: _without(d / "nosweeps.db", "DROP TABLE sweeps"), "its table sweeps is"),
        (
            lambda d: _without(d / "nocol.db", "ALTER TABLE runs DROP COLUMN affinity"),
            "its column runs.affinity is missing",
        ),
    ],
)
def test_a_source_that_cannot_be_imported_is_one_line_and_changes_nothing(
    tmp_path, capsys, make, said
):
    here = tmp_path / "here.db"
    with RunStore(here) as store:
        _run(store, "here00000001")
    source = make(tmp_path)
    assert main(["runs", "import", str(source), "--store", str(here)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"trainscale: error: cannot import {source}: ")
    assert said in err
    with RunStore(here) as store:
        assert [r.run_id for r in store.list_runs()] == ["here00000001"]


def _text(path: Path) -> Path:
    path.write_text("not a database")
    return path


def _newer(path: Path) -> Path:
    return _marked(path, str(SCHEMA_VERSION + 1))


def _marked(path: Path, version: str) -> Path:
    """A source store whose schema version reads `version`."""
    _source(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    return path


def _without(path: Path, damage: str) -> Path:
    """A source store damaged by the SQL statement `damage` (a table or column gone)."""
    _source(path)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(damage)
    return path


def test_the_command_says_what_it_copied_and_left(tmp_path, capsys):
    source = _source(tmp_path / "laptop.db")
    here = tmp_path / "here.db"
    assert main(["runs", "import", str(source), "--store", str(here)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"imported 2 run(s), 1 sweep(s) and 1 probe(s) from {source} into {here}"
    assert (
        out[1]
        == f"  1 run(s) still running in {source}: left out (import again once they have ended)"
    )
    assert main(["runs", "import", str(source), "--store", str(here), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {
        "source": str(source),
        "store": str(here),
        "runs": 0,
        "sweeps": 0,
        "probes": 0,
        "already_there": 2,
        "still_running": 1,
        "completed_failed": 0,
    }


def test_a_mistyped_source_makes_no_store_to_import_into(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    assert main(["runs", "import", "typo.db"]) == 2
    assert "cannot import typo.db: no such file" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no trainscale.db made
    _without(tmp_path / "damaged.db", "DROP TABLE sweeps")
    assert main(["runs", "import", "damaged.db"]) == 2
    assert "its table sweeps is missing" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.db"]


def test_a_snapshot_that_cannot_be_made_is_one_line(tmp_path, capsys, monkeypatch):
    source = _source(tmp_path / "laptop.db")

    class FullDisk:
        """A reader whose backup finds the temporary folder full."""

        def backup(self, target: object) -> None:
            raise sqlite3.OperationalError("database or disk is full")

        def close(self) -> None:
            pass

    monkeypatch.setattr(store_import, "open_read_only", lambda path: FullDisk())
    monkeypatch.setattr(store_import, "check_source", lambda source, store: None)
    assert main(["runs", "import", str(source), "--store", str(tmp_path / "here.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot import {source}: its snapshot in" in err
    assert "database or disk is full" in err and "TMPDIR" in err
