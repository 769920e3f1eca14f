"""Custom workload files for tests: the shipped example, a tiny working one, broken ones."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import trainscale.workloads as workloads

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_workload" / "my_workload.py"
"""The example custom workload shipped with trainscale (docs/custom-workloads.md)."""

EXAMPLE_REF = f"{EXAMPLE}:make_workload"

TINY = """
import numpy as np
from torch import nn

from trainscale.workloads import Recipe, array_workload


class Tiny(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        {forward}


def make_workload():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    return array_workload(
        "{name}",
        model=lambda meta: Tiny(meta["num_features"], meta["num_classes"]),
        train=(x[:384], y[:384]),
        test=(x[384:], y[384:]),
        recipe=Recipe(optimizer="sgd", lr=0.1, batch_size=32, epochs=1),
        target_accuracy=0.9,
    )
"""


def tiny_workload(directory: Path, name: str = "tiny", forward: str = "return self.fc(x)") -> Path:
    """Write a tiny working custom workload called `name` (its model's forward is `forward`);
    returns the file's path."""
    path = directory / f"{name.replace('-', '_')}_workload.py"
    path.write_text(TINY.replace("{name}", name).replace("{forward}", forward))
    return path


BROKEN = {
    # kind: (file text, the end of the one error line after 'trainscale: error: ')
    "syntax error": ("def make_workload(:\n    pass\n", "broken.py line 1: invalid syntax"),
    "import error": (
        "import no_such_module_here\n",
        "broken.py failed to import: ModuleNotFoundError: No module named "
        "'no_such_module_here' (broken.py line 1, in <module>)",
    ),
    "missing attribute": (
        "value = 1\n",
        "broken.py has no attribute 'make_workload'; it defines: value; if it is a training "
        "script: trainscale run broken.py [options] --",
    ),
    "wrong return type": (
        "def make_workload():\n    return {'name': 'x'}\n",
        "broken.py:make_workload returned dict, not a trainscale Workload",
    ),
    "factory raises": (
        "def make_workload():\n    raise ValueError('no arrays today')\n",
        "broken.py:make_workload raised ValueError: no arrays today (broken.py line 2, in "
        "make_workload)",
    ),
}


@pytest.fixture
def fresh_custom_workloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the custom workloads this process loaded (tests reuse names across files)."""
    monkeypatch.setattr(workloads, "_custom_by_source", {})
    monkeypatch.setattr(workloads, "_source_by_name", {})


def run_in_subprocess(
    tmp_path: Path, path: Path, timeout_s: float, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`trainscale run FILE:make_workload` for a short synthetic run, as a fresh process
    (`python -m trainscale`, the console command's own entry) in `tmp_path` with its store
    at `tmp_path/runs.db`; the finished process and its seconds. `timeout_s` is the test's
    bound: a command that would hang fails the test there."""
    command = [sys.executable, "-m", "trainscale", "run", f"{path}:make_workload"]
    options = ["--data", "synthetic", "--steps", "6", "--no-eval", "--quiet"]
    environ = {**os.environ, "TRAINSCALE_CACHE_DIR": str(tmp_path / "cache"), **(env or {})}
    start = time.monotonic()
    done = subprocess.run(
        [*command, *options, "--store", str(tmp_path / "runs.db")],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    return done, time.monotonic() - start
