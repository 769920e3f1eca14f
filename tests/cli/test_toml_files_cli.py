"""TOML files a user gives trainscale that cannot be read: every command that reads one (a
sweep file, a cluster file, a price file) answers in one line naming the file, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import one_error_line, run_cli

DEPTH = 100_000


def deeply_nested(path: Path) -> Path:
    """Valid TOML syntax, but arrays nested far beyond what a recursive parser follows."""
    path.write_text("x = " + "[" * DEPTH + "]" * DEPTH + "\n", encoding="utf-8")
    return path


def not_utf8(path: Path) -> Path:
    path.write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))  # 0xe9 on its own
    return path


def not_toml(path: Path) -> Path:
    path.write_text("name = \n[[\n", encoding="utf-8")
    return path


FILES = {
    "nested": (deeply_nested, "nested too deeply"),
    "latin-1": (not_utf8, "is not UTF-8 text (byte 0xe9 at offset 11)"),
    "syntax": (not_toml, "is not valid TOML"),
}


def _commands(file: Path, tmp: Path) -> dict[str, tuple[list[str], str]]:
    store = str(tmp / "runs.db")
    return {
        "sweep": (["sweep", str(file), "--dry-run", "--store", store], "sweep file"),
        "simulate": (
            ["simulate", "mnist-cnn", "--cluster", str(file), "--store", store],
            "cluster file",
        ),
        "report": (
            [
                "report",
                "--runs",
                "abc",
                "--out",
                str(tmp / "out"),
                "--prices",
                str(file),
                "--store",
                store,
            ],
            "price file",
        ),  # fmt: skip
    }


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_PRICES", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("kind", sorted(FILES))
@pytest.mark.parametrize("command", ["sweep", "simulate", "report"])
def test_unreadable_toml_is_one_line_exit_2(command, kind, tmp_path, capsys):
    make, fragment = FILES[kind]
    file = make(tmp_path / f"{kind}.toml")
    args, what = _commands(file, tmp_path)[command]
    assert run_cli(args) == 2
    line = one_error_line(capsys)
    assert line.startswith("trainscale: error: ")
    assert f"{what} {file}" in line and fragment in line, line
    assert not (tmp_path / "out").exists()


def test_prices_from_the_environment_too(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TRAINSCALE_PRICES", str(deeply_nested(tmp_path / "p.toml")))
    args = ["report", "--runs", "abc", "--out", str(tmp_path / "out")]
    assert run_cli([*args, "--store", str(tmp_path / "runs.db")]) == 2
    assert "nested too deeply" in one_error_line(capsys)
