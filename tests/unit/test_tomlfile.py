"""trainscale.config.files: every way a TOML file can fail to be read or validated is one
line naming the file, and for a value the key path and the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import Field, model_validator

from trainscale.config.files import Expect, TomlFile, TomlTable, load_toml, read_toml, validate
from trainscale.errors import ConfigError
from trainscale.simulator.cluster import ClusterError
from trainscale.simulator.cluster_file import ClusterFile


def test_reads_utf8_toml(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text('name = "café"\n[a]\nb = [1, [2, 3]]\n', encoding="utf-8")
    assert read_toml(path, "sweep file") == {"name": "café", "a": {"b": [1, [2, 3]]}}


@pytest.mark.parametrize(
    "read",
    [
        lambda path: read_toml(path, "cluster file", ClusterError),
        lambda path: load_toml(path, ClusterFile),
    ],
    ids=["read_toml", "load_toml"],
)
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
def test_failures_are_one_line_naming_the_file(tmp_path: Path, read, make, fragment: str) -> None:
    path = tmp_path / "c.toml"
    make(path)
    with pytest.raises(ClusterError) as info:
        read(path)
    message = str(info.value)
    assert isinstance(info.value, ConfigError)
    assert message.startswith(f"cluster file {path} ")
    assert fragment in message and "\n" not in message


# -- validation ------------------------------------------------------------------------------


class _Error(ConfigError):
    pass


class _Link(TomlTable):
    alpha: Annotated[float, Field(ge=0), Expect("a number >= 0")]


class _Rows(TomlTable):
    expect = "a table of rows"
    unknown_key = "unknown row; see the manual"

    a: int | None = None


class _File(TomlFile):
    file_kind = "test file"
    error = _Error

    count: Annotated[int, Field(ge=1), Expect("a whole number >= 1")]
    sizes: list[int] = []
    either: int | str = 0
    kind: Literal["x", "y"] = "x"
    link: _Link
    rows: _Rows = Field(default_factory=_Rows)
    prices: dict[Literal["cpu", "gpu"], float] = {}
    text: str = ""

    @model_validator(mode="after")
    def _across(self) -> _File:
        if self.text == "clash":
            raise ValueError("text: clashes with count; set one")
        return self


GOOD = {"count": 2, "link": {"alpha": 1}}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"count": None}, "count is missing"),
        # A misspelt key is why another is missing: the line names the misspelling.
        ({"count": None, "cuont": 2}, "cuont: unknown key; did you mean count? allowed: count,"),
        ({"link": None}, "[link] section is missing"),
        ({"link": {}}, "link.alpha is missing"),
        ({"count": 0}, "count: must be a whole number >= 1, got 0"),
        ({"count": "2"}, "count: must be a whole number >= 1, got '2'"),
        ({"count": True}, "count: must be a whole number >= 1, got True"),
        ({"count": 2.0}, "count: must be a whole number >= 1, got 2.0"),
        ({"sizes": [1, True]}, "sizes[1]: input should be a valid integer, got True"),
        ({"sizes": 3}, "sizes: input should be a valid list, got 3"),
        # The branch pydantic tried ('int', 'str') is not part of the key path.
        ({"either": 1.5}, "either: input should be a valid integer, got 1.5"),
        ({"kind": "z"}, "kind: input should be 'x' or 'y', got 'z'"),
        ({"link": {"alpha": -1}}, "link.alpha: must be a number >= 0, got -1"),
        ({"link": 3}, "link: must be a table ([section]), got 3"),
        ({"rows": 3}, "rows: must be a table of rows, got 3"),
        ({"colour": 1}, "colour: unknown key; allowed: count, either, kind, link, prices, rows"),
        ({"link": {"alpha": 1, "beta": 2}}, "link.beta: unknown key; allowed: alpha"),
        ({"rows": {"b": 1}}, "rows.b: unknown row; see the manual"),
        ({"prices": {"tpu": 1.0}}, "prices.tpu: unknown key; input should be 'cpu' or 'gpu'"),
        ({"prices": {"my gpu": 1.0}}, 'prices."my gpu": unknown key; input should be'),
        ({"prices": {"cpu": "x"}}, "prices.cpu: input should be a valid number, got 'x'"),
        ({"text": "clash"}, "text: clashes with count; set one"),
    ],
)
def test_validation_errors_name_the_key_path_and_the_reason(change, reason) -> None:
    raw = {**GOOD, **change}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(_Error) as info:
        validate(raw, _File, "test file t.toml")
    message = str(info.value)
    assert message.startswith("test file t.toml: "), message
    assert reason in message and "\n" not in message, message


def test_long_values_are_cut_short() -> None:
    with pytest.raises(_Error) as info:
        validate({**GOOD, "sizes": ["x" * 500]}, _File, "f")
    assert str(info.value) == (
        "f: sizes[0]: input should be a valid integer, got '" + "x" * 56 + "..."
    )


def test_load_toml_returns_the_validated_model(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("count = 3\nsizes = [1, 2]\n[link]\nalpha = 2\n", encoding="utf-8")
    loaded = load_toml(path, _File)
    assert isinstance(loaded, _File)
    assert loaded.count == 3 and loaded.sizes == [1, 2]
    assert loaded.link.alpha == 2.0 and isinstance(loaded.link.alpha, float)
    path.write_text("count = 3\n[link]\nalpha = -2\n", encoding="utf-8")
    with pytest.raises(_Error, match=rf"^test file {path}: link.alpha: must be a number >= 0"):
        load_toml(path, _File)
