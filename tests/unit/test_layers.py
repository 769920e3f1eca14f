"""The architecture holds: import-linter checks the contracts in pyproject.toml (the layers,
and no import cycle between the modules of a package), function-level imports included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trainscale

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(trainscale.__file__).parent


def _contracts() -> list[dict]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["tool"]["importlinter"]["contracts"]


def test_import_linter_keeps_every_contract() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
         "lint_imports_command()", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_every_part_of_the_package_sits_in_a_layer() -> None:
    # A new package outside the layers would be checked by nothing.
    (layers,) = [c["layers"] for c in _contracts() if c["type"] == "layers"]
    named = {name.strip() for line in layers for name in line.split("|")}
    parts = {
        f"trainscale.{path.stem if path.is_file() else path.name}"
        for path in PACKAGE.iterdir()
        if (path.is_dir() and (path / "__init__.py").exists())
        or (path.suffix == ".py" and path.stem not in ("__init__", "__main__"))
    }
    assert parts <= named, sorted(parts - named)


def test_a_broken_layer_is_reported(tmp_path: Path) -> None:
    # The same tool on a contract this code breaks: the check can fail.
    config = tmp_path / "contracts.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "trainscale"\n'
        '[[tool.importlinter.contracts]]\nname = "upside down"\ntype = "layers"\n'
        'layers = ["trainscale.errors", "trainscale.cli"]\n'
    )
    done = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
         "lint_imports_command()", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode != 0
    assert "trainscale.cli is not allowed to import trainscale.errors" in done.stdout
