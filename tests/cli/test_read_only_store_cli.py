"""Read commands (`runs list/show`, `report`, and `runs import` of it) only read the store:
they work on a store they cannot write, never change it, and never create or convert a file
into one."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from trainscale.errors import StoreError
from trainscale.results import sqlite_file
from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.owned_runs import create_owned_run, dead_owner
from tests.helpers.report_store import build_store, cpu_parallel_configs, run_id


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


def _fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file of `folder`: its content hash and modification time."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
    }


def test_read_commands_change_nothing_in_a_writable_store(tmp_path, capsys):
    folder = tmp_path / "store"
    folder.mkdir()
    path = build_store(folder / "runs.db", cpu_parallel_configs())
    before = _fingerprint(folder)
    assert run_cli(["runs", "list", "--store", str(path)]) == 0
    assert run_cli(["runs", "show", run_id(0, 0), "--store", str(path)]) == 0
    out = tmp_path / "report"
    assert run_cli(["report", "--sweep", "5eed", "--out", str(out), "--store", str(path)]) == 0
    capsys.readouterr()
    assert _fingerprint(folder) == before  # no -wal or -shm left, no byte or mtime changed


def test_a_store_opened_for_reading_refuses_writes_through_its_connection(tmp_path):
    path = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    with RunStore(path, create=False) as store:
        with pytest.raises(sqlite3.OperationalError, match="readonly|query_only|read-only"):
            store._connection().execute("DELETE FROM runs")
        assert len(store.list_runs()) > 0


def test_read_commands_work_on_a_read_only_mount(tmp_path):
    """A store the user cannot write (root ignores permissions, so: a read-only bind mount
    in a private mount namespace), with a stale run in it that cannot be marked now."""
    folder = tmp_path / "store"
    folder.mkdir()
    path = build_store(folder / "runs.db", cpu_parallel_configs())
    with RunStore(path) as store:
        create_owned_run(store, "orphan0000", dead_owner())
        ended = len(store.list_runs()) - 1  # the orphan still 'running' there
    before = _fingerprint(folder)
    done = _in_read_only_mount(
        folder,
        [
            f'runs list --store "{path}"',
            f'runs show orphan --store "{path}"',
            f'report --sweep 5eed --out "{tmp_path / "report"}" --store "{path}"',
            f'runs import "{path}" --store "{tmp_path / "into.db"}"',
        ],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "readonly" not in done.stderr and "Traceback" not in done.stderr
    assert "orphan00" in done.stdout and (tmp_path / "report").is_dir()
    assert "imported " in done.stdout  # its runs copied into a store that can be written
    with RunStore(tmp_path / "into.db", create=False) as into:
        assert len(into.list_runs()) == ended
    assert _fingerprint(folder) == before
    # Where the store can be written again, the stale run is marked as before.
    with RunStore(path, create=False, fail_stale=True) as store:
        assert store.get_run("orphan0000").status == "failed"


@pytest.mark.parametrize("content", [b"x", b"", b"some notes\n" * 100])
@pytest.mark.parametrize(
    "command",
    [["runs", "list"], ["runs", "show", "abc"], ["report", "--runs", "abc", "--out", "r"]],
)
def test_a_read_command_never_turns_a_file_into_a_store(tmp_path, capsys, content, command):
    notes = tmp_path / "notes.txt"
    notes.write_bytes(content)
    assert run_cli([*command, "--store", str(notes)]) != 0
    line = one_error_line(capsys)
    assert f"{notes} is not a trainscale results store" in line
    assert notes.read_bytes() == content
    assert {p.name for p in tmp_path.iterdir()} - {"home"} == {"notes.txt"}  # no -wal, -shm


def test_a_read_command_creates_no_store_where_there_is_none(tmp_path, capsys):
    missing = tmp_path / "none.db"
    assert run_cli(["runs", "list", "--store", str(missing)]) != 0
    assert f"no results store at {missing}" in one_error_line(capsys)
    assert not missing.exists()
    with pytest.raises(StoreError, match="no results store"):
        RunStore(missing, create=False)
    assert not missing.exists()


def _in_read_only_mount(folder: Path, commands: list[str]) -> subprocess.CompletedProcess:
    """Run trainscale `commands` (argument strings) with `folder` mounted read-only, in a
    private mount namespace (root ignores permissions); skips where that cannot be made."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs root, unshare and mount to make a read-only mount privately")
    trainscale = f"{sys.executable} -m trainscale"
    script = f'mount --bind "{folder}" "{folder}" && mount -o remount,bind,ro "{folder}" || exit 99'
    script += "".join(f" && {trainscale} {command}" for command in commands)
    env = {k: v for k, v in os.environ.items() if k != "TRAINSCALE_FAULT_INJECT"}
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if done.returncode == 99:
        pytest.skip(f"cannot mount here: {done.stderr[-300:]}")
    return done


def test_a_read_only_store_with_changes_in_its_wal_is_read_with_them(tmp_path):
    """A store copied with its -wal (changes not yet folded into the file) and no -shm, in a
    place that cannot be written: SQLite cannot make the -shm, and an immutable read would
    not see the WAL's runs."""
    live = build_store(tmp_path / "live.db", cpu_parallel_configs())
    copy = tmp_path / "copy"
    copy.mkdir()
    with RunStore(live) as store:
        create_owned_run(store, "inwal00000", dead_owner())
        # Copied while the writer is open: the new run is in the WAL, not in the file yet.
        shutil.copyfile(live, copy / "runs.db")
        shutil.copyfile(tmp_path / "live.db-wal", copy / "runs.db-wal")
    assert (copy / "runs.db-wal").stat().st_size > 0
    before = _fingerprint(copy)
    path = copy / "runs.db"
    done = _in_read_only_mount(
        copy,
        [
            f'runs show inwal --store "{path}"',
            f'runs import "{path}" --store "{tmp_path / "into.db"}"',
        ],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "inwal000" in done.stdout and "Traceback" not in done.stderr
    assert _fingerprint(copy) == before


class _RefusedShm:
    """A mode=ro connection whose first read needs a -shm it may not make."""

    def execute(self, *args: object) -> None:
        error = sqlite3.OperationalError("attempt to write a readonly database")
        error.sqlite_errorcode = 1544  # SQLITE_READONLY_DIRECTORY
        raise error

    def close(self) -> None:
        pass


def _as_another_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process may not write the store's folder, nor make its -shm there."""
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    opened = sqlite_file.open_connection

    def refused_shm(path: Path, mode: str, *, immutable: bool = False) -> object:
        if mode == "ro" and not immutable:
            return _RefusedShm()
        return opened(path, mode, immutable=immutable)

    monkeypatch.setattr(sqlite_file, "open_connection", refused_shm)


def test_a_store_whose_shared_memory_file_cannot_be_made_for_want_of_rights_is_read(
    tmp_path, monkeypatch
):
    """In another user's folder SQLite answers a read-only error (SQLITE_READONLY_DIRECTORY)
    where a read-only mount answers 'unable to open': both are read the same way."""
    path = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    with RunStore(path, create=False) as store:
        stored = len(store.list_runs())
    _as_another_user(monkeypatch)
    with RunStore(path, create=False) as store:
        assert len(store.list_runs()) == stored


def test_a_copy_that_cannot_be_made_is_one_line(tmp_path, monkeypatch, capsys):
    """Changes in a -wal of a folder that cannot be written are read from a copy: where the
    temporary folder is full, that is one line, not a traceback."""
    path = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    (tmp_path / "runs.db-wal").write_bytes(b"\0" * 64)  # changes not yet folded in
    _as_another_user(monkeypatch)

    def no_room(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sqlite_file.shutil, "copyfile", no_room)
    assert run_cli(["runs", "list", "--store", str(path)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"trainscale: error: cannot use results store {path}: its changes")
    assert "No space left on device" in line and "TMPDIR" in line
