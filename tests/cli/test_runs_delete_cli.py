"""`trainscale runs delete`: the runs named (or filtered) go with their epochs and step
times, once confirmed; nothing else goes, and a mistake deletes nothing."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.stored_runs import add_run


def _add(store: RunStore, run_id: str, status: str, tag: str | None = None) -> None:
    add_run(store, run_id, tag=tag)
    if status == "completed":
        store.complete_run(run_id, {"samples_per_s": 1.0}, [{"train_loss": 0.5}], [0.1, 0.2])
    elif status == "failed":
        store.fail_run(run_id, "DataError: no data")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    with RunStore(path) as opened:
        _add(opened, "aaaa00000001", "completed", tag="demo")
        _add(opened, "bbbb00000001", "completed", tag="demo")
        _add(opened, "cccc00000001", "failed")
        _add(opened, "dddd00000001", "completed")
    return path


def _left(store: Path) -> list[str]:
    with sqlite3.connect(store) as conn:
        return sorted(row[0] for row in conn.execute("SELECT run_id FROM runs"))


def _rows(store: Path, table: str, run_id: str) -> int:
    with sqlite3.connect(store) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,)).fetchone()[
            0
        ]


def test_named_runs_go_with_their_epochs_and_step_times(store, capsys):
    assert run_cli(["runs", "delete", "aaaa", "cccc", "--yes", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "  aaaa0000  " in out and "  cccc0000  " in out
    assert out.strip().endswith(f"deleted 2 run(s) from {store}")
    assert _left(store) == ["bbbb00000001", "dddd00000001"]
    for table in ("epochs", "step_times"):
        assert _rows(store, table, "aaaa00000001") == 0
        assert _rows(store, table, "bbbb00000001") > 0


def test_filters_choose_and_a_dry_run_deletes_nothing(store, capsys):
    argv = ["runs", "delete", "--tag", "demo", "--store", str(store)]
    assert run_cli([*argv, "--dry-run"]) == 0
    assert "2 run(s) would be deleted" in capsys.readouterr().out
    assert len(_left(store)) == 4
    assert run_cli([*argv, "--yes", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {
        "store": str(store),
        "dry_run": False,
        "runs": ["bbbb00000001", "aaaa00000001"],
    }
    assert _left(store) == ["cccc00000001", "dddd00000001"]


class _Terminal(io.StringIO):
    """A terminal whose user types `text` (an empty one: Ctrl-D)."""

    def isatty(self) -> bool:
        return True


def test_the_prompt_deletes_on_yes_only(store, capsys, monkeypatch):
    for typed in ("n\n", ""):  # no, and Ctrl-D (the end of input)
        monkeypatch.setattr("sys.stdin", _Terminal(typed))
        assert run_cli(["runs", "delete", "--status", "failed", "--store", str(store)]) == 2
        assert one_error_line(capsys).endswith("nothing deleted")
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    assert run_cli(["runs", "delete", "--status", "failed", "--store", str(store)]) == 0
    assert "cccc00000001" not in _left(store)


def test_the_prompt_keeps_out_of_the_json_document(store, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    assert run_cli(["runs", "delete", "aaaa", "--json", "--store", str(store)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["runs"] == ["aaaa00000001"]
    assert "delete 1 run(s) from" in err


def test_a_run_whose_stored_json_is_damaged_can_be_deleted(store, capsys):
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE runs SET summary_json = '{bad' WHERE run_id = 'aaaa00000001'")
    argv = ["runs", "delete", "--tag", "demo", "--store", str(store)]
    assert run_cli([*argv, "--dry-run"]) == 0  # listings leave it out: the filter finds it
    out = capsys.readouterr().out
    assert "aaaa0000  damaged stored JSON (summary_json)" in out
    assert "2 run(s) would be deleted" in out
    # --limit N: the newest N readable runs, not every damaged row read past on the way.
    assert run_cli([*argv, "--limit", "1", "--dry-run"]) == 0
    assert "1 run(s) would be deleted" in capsys.readouterr().out
    assert run_cli(["runs", "delete", "aaaa", "--yes", "--store", str(store)]) == 0
    assert "deleted 1 run(s)" in capsys.readouterr().out
    assert "aaaa00000001" not in _left(store)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "name the runs to delete: run ids, or --workload, --status or --tag"),
        (["aaaa"], "1 run(s) would be deleted from"),  # no --yes, no terminal to ask
        (["aaaa", "--status", "failed", "--yes"], "by id or by --workload"),
        (["zzzz", "--yes"], "no run 'zzzz'"),
        (["aaaa", "eeee", "--yes"], "run eeee0000 is still running: stop it"),
        (["--status", "running", "--dry-run"], "run eeee0000 is still running: stop it"),
    ],
)
def test_a_mistake_is_one_line_and_deletes_nothing(store, capsys, monkeypatch, argv, said):
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with RunStore(store) as opened:  # a run of this live process: not stale
        _add(opened, "eeee00000001", "running")
    assert run_cli(["runs", "delete", *argv, "--store", str(store)]) == 2
    assert said in one_error_line(capsys)
    assert len(_left(store)) == 5
