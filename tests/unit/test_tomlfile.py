"""trainscale.config.files: every way a TOML file can fail to be read is one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.config.files import load_toml
from trainscale.errors import ConfigError
from trainscale.simulate.cluster import ClusterError


def test_reads_utf8_toml(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text('name = "café"\n[a]\nb = [1, [2, 3]]\n', encoding="utf-8")
    assert load_toml(path, "sweep file") == {"name": "café", "a": {"b": [1, [2, 3]]}}


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: p.write_bytes(b"\xff\xfea = 1\n"), "is not UTF-8 text (byte 0xff at offset 0)"),
        (lambda p: p.write_text("a = 1\na = 2\n"), "is not valid TOML: Cannot overwrite a value"),
        (lambda p: p.write_text("x = " + "{a = " * 5000 + "1" + "}" * 5000), "nested too deeply"),
    ],
    ids=["missing", "directory", "encoding", "syntax", "nested-tables"],
)
def test_failures_are_one_line_naming_the_file(tmp_path: Path, make, fragment: str) -> None:
    path = tmp_path / "c.toml"
    make(path)
    with pytest.raises(ClusterError) as info:
        load_toml(path, "cluster file", ClusterError)
    message = str(info.value)
    assert isinstance(info.value, ConfigError)
    assert message.startswith(f"cluster file {path} ")
    assert fragment in message and "\n" not in message
