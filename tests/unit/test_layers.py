"""Lower layers import nothing above them (docs/design.md lists the layers): checked on the
source, function-level imports included, so a lazy import cannot hide an upward one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import trainscale

PACKAGE = Path(trainscale.__file__).parent

ALLOWED = {
    # system.py holds this machine's facts: the hardware layer's.
    "parallel": {"parallel", "config", "data", "hardware", "system", "metrics", "errors"},
    "data": {"data", "results", "hardware", "system", "metrics", "config", "errors"},
}


def imported_packages(path: Path) -> set[str]:
    """The trainscale sub-packages (or top-level modules) that `path` imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "trainscale":  # `from trainscale import x`
                names = [f"trainscale.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "trainscale" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_what_lies_below_it(layer):
    wrong = {
        f"{path.relative_to(PACKAGE)} imports trainscale.{package}"
        for path in sorted((PACKAGE / layer).glob("*.py"))
        for package in imported_packages(path) - ALLOWED[layer]
    }
    assert not wrong, sorted(wrong)


def test_the_scanner_sees_function_level_imports(tmp_path):
    source = tmp_path / "module.py"
    source.write_text(
        "from trainscale.errors import ConfigError\n"
        "def f():\n"
        "    from trainscale.train.breakdown import timed_allreduce_hook\n"
        "    import trainscale.workloads.base\n"
        "    from trainscale import cli\n"
    )
    assert imported_packages(source) == {"errors", "train", "workloads", "cli"}
