"""Files a command writes (`runs export --out`, `bench --out`) are written whole through a
rename, except where a rename would replace something that is not a plain file: a symbolic
link's target is written and the link stays; a FIFO (as a device such as /dev/stdout) is
written in place, its reader gets the text."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from trainscale.errors import ConfigError
from trainscale.results.outputs import check_out_file, write_atomically


def test_a_plain_file_is_replaced_whole(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    out.write_text("old")
    write_atomically(out, lambda f: f.write("new"))
    assert out.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_a_links_target_is_written_and_the_link_stays(tmp_path: Path) -> None:
    target = tmp_path / "target.csv"
    target.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    check_out_file(link)
    write_atomically(link, lambda f: f.write("new"))
    assert link.is_symlink() and target.read_text() == "new"


def test_a_fifo_is_written_in_place_for_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)
    reader.start()
    check_out_file(fifo)
    write_atomically(fifo, lambda f: f.write("rows\n"))
    reader.join(timeout=10)
    assert read == ["rows\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still the pipe, not a plain file


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="it is a directory"):
        check_out_file(tmp_path)


def test_a_results_store_is_never_written_over(tmp_path: Path, capsys) -> None:
    from trainscale.cli import main
    from trainscale.errors import StoreError
    from trainscale.results.store import RunStore

    store = tmp_path / "trainscale.db"
    RunStore(store).close()
    kept = store.read_bytes()
    with pytest.raises(ConfigError, match="it is a SQLite database"):
        check_out_file(store)
    with pytest.raises(StoreError, match="it is a SQLite database"):
        write_atomically(store, lambda f: f.write("table"))
    # `runs export --out` naming the store it reads: one line, exit 2, the store whole.
    argv = ["runs", "export", "--format", "csv", "--store", str(store), "--out", str(store)]
    assert main(argv) == 2
    assert "it is a SQLite database" in capsys.readouterr().err
    assert store.read_bytes() == kept


def test_a_reader_that_stopped_is_a_broken_pipe_not_a_write_error() -> None:
    # `runs export --out /dev/stdout | head -1`: the command exits as on a closed stdout.
    def stopped_reader(out: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        write_atomically(Path("/dev/null"), stopped_reader)
