"""Training and the bench need no pydantic: it reads the TOML files users give (sweeps,
clusters, prices, the API's keywords), so an image that lacks it (a GPU machine's, before
anything is installed) still runs `trainscale run` and `trainscale bench`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainscale.results.store import RunStore

# Imported by every process that starts with it on PYTHONPATH, the launched workers too.
BLOCK = """\
import sys
for name in ("pydantic", "pydantic_core"):
    sys.modules[name] = None  # `import pydantic` raises ModuleNotFoundError
"""


@pytest.fixture
def without_pydantic(tmp_path: Path) -> dict[str, str]:
    """The environment of a process, and of the processes it starts, that cannot import
    pydantic."""
    folder = tmp_path / "block"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCK)
    paths = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def test_the_block_is_real(without_pydantic):
    code = "import trainscale.config.files"  # a TOML reader: it imports pydantic
    done = subprocess.run(
        [sys.executable, "-c", code], env=without_pydantic, capture_output=True, text=True
    )
    assert done.returncode != 0 and "pydantic" in done.stderr


def test_a_run_trains_and_is_stored_without_pydantic(tmp_path, without_pydantic):
    store = tmp_path / "s.db"
    args = ["run", "mnist-cnn", "--data", "synthetic", "--steps", "3", "--no-eval"]
    done = subprocess.run(
        [sys.executable, "-m", "trainscale", *args, "--quiet", "--store", str(store)],
        env=without_pydantic,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with RunStore(store) as opened:
        assert [run.status for run in opened.list_runs()] == ["completed"]


def test_the_bench_and_its_progress_import_without_pydantic(without_pydantic):
    # The bench's runs are the run above; its own modules are what it adds.
    code = (
        "import trainscale.cli.bench_cmd, trainscale.cli.bench_progress\n"
        "import trainscale.benchmark.run, trainscale.sweeps.estimate\n"
        "import trainscale.reporting.aggregate, trainscale.cli.runs_cmd\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=without_pydantic, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
