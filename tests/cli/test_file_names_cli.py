"""Options that name a file (a store, an exported table, the bench's table) refuse a name
that ends with a separator, which names a folder."""

from __future__ import annotations

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.stored_runs import add_run


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "list", "--store", "newdir/"],
        ["runs", "export", "--format", "csv", "--out", "newdir/", "--store", "runs.db"],
        ["bench", "--out", "newdir/", "--workload", "no-such-workload"],
    ],
)
def test_a_file_named_as_a_folder_is_refused_and_nothing_is_written(
    argv, tmp_path, capsys, monkeypatch
):
    # Path("newdir/") is "newdir": a file of that name would be written where a folder was meant.
    monkeypatch.chdir(tmp_path)
    with RunStore(tmp_path / "runs.db") as store:
        add_run(store, "aaaa00000001")
    assert run_cli(argv) == 2
    line = one_error_line(capsys)
    assert "newdir/" in line and "names a folder" in line
    assert not (tmp_path / "newdir").exists()
