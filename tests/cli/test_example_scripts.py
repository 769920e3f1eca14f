"""The example training scripts of docs/own-scripts.md (a character-level GPT with gradient
accumulation, a Lightning Fabric classifier): each measured by `trainscale run` with 1 and 2
workers and stored with its figures, and each an ordinary script but for at most 5 lines
(its meter lines and the import), which the same script without them shows."""

from __future__ import annotations

import ast
import os
import re
import runpy
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from trainscale.results.store import RunStore
from trainscale.train import meter as meter_module

from tests.helpers.cli import run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GPT = EXAMPLES / "char_gpt_script.py"
FABRIC = EXAMPLES / "fabric_script.py"
NEEDS_FABRIC = pytest.mark.skipif(
    find_spec("lightning_fabric") is None,
    reason="needs lightning-fabric (pip install 'trainscale[examples]')",
)

# A few tiny steps: 4 optimizer steps of 2 micro-batches of 4 windows, evaluated twice.
GPT_ARGS = [
    *("--max-steps", "4", "--eval-every", "2", "--grad-accum", "2", "--batch-size", "4"),
    *("--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "16"),
    *("--train-chars", "5000", "--eval-batches", "16"),
]
FABRIC_ARGS = ["--max-steps", "6", "--train-samples", "1024", "--test-samples", "256"]


def _stored_run(store: Path) -> Any:
    with RunStore(store) as opened:
        (record,) = opened.list_runs()
    return record


def _measure(script: Path, workers: int, store: Path, args: list[str]) -> Any:
    """The stored run of `trainscale run SCRIPT --workers N -- ARGS` (synthetic text or
    vectors, one thread a worker, the first step left out of the statistics)."""
    command = ["run", str(script), "--data", "synthetic", "--workers", str(workers)]
    command += ["--threads-per-worker", "1", "--warmup-steps", "1", "--store", str(store)]
    assert run_cli([*command, "--", *args]) == 0
    run = _stored_run(store)
    assert (run.status, run.world_size, run.data_kind) == ("completed", workers, "synthetic")
    return run


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2])  # 1 worker: the mnist example's tests; 2 adds DDP
def test_the_char_gpt_is_measured_one_optimizer_step_a_step(tmp_path: Path, workers: int) -> None:
    run = _measure(GPT, workers, tmp_path / "runs.db", GPT_ARGS)
    summary = run.summary
    assert summary["num_steps"] == 4 and summary["steps_per_worker"] == [4] * workers
    # A step is an optimizer step: every micro-batch of the accumulation (2 x 4 sequences)
    # on each worker.
    assert summary["global_batch_measured"] == run.global_batch_size == 8 * workers
    curve = [accuracy for _, accuracy in summary["accuracy_curve"]]
    assert len(curve) == 2  # every 2 of the 4 steps
    assert curve[-1] == summary["test_accuracy"]
    assert summary["test_accuracy"] > 2 / 27  # twice chance over its 27 characters


@pytest.mark.slow
@NEEDS_FABRIC
@pytest.mark.parametrize("workers", [2])  # 2 workers: Fabric joins the launcher's job
def test_the_fabric_script_is_measured_under_the_launchers_environment(
    tmp_path: Path, workers: int
) -> None:
    # Fabric joins the workers trainscale started (torchrun's variables) as it joins
    # torchrun's: with 2 workers it wraps DDP and shards the data, 64 samples each a step.
    run = _measure(FABRIC, workers, tmp_path / "runs.db", FABRIC_ARGS)
    summary = run.summary
    assert summary["num_steps"] == 6 and summary["steps_per_worker"] == [6] * workers
    assert summary["global_batch_measured"] == run.global_batch_size == 64 * workers
    assert len(summary["accuracy_curve"]) == 1
    assert summary["test_accuracy"] > 2 / 10  # twice chance over its 10 classes
    # Fabric kept the run's thread budget (it sets its own only where OMP_NUM_THREADS is not).
    assert [worker["torch_threads"] for worker in summary["workers"]] == [1] * workers


METER_COMMENT = re.compile(r"^\s*#.*\b(meter|trainscale)\b")


def _is_meter_code(node: ast.AST) -> bool:
    return any(
        isinstance(sub, ast.Name) and sub.id in ("meter", "trainscale") for sub in ast.walk(node)
    ) or (isinstance(node, ast.Import) and any(a.name == "trainscale" for a in node.names))


def without_meter(source: str) -> tuple[str, int]:
    """The script without its meter lines (the import, `trainscale.meter()`, the calls of
    `meter.evaluate`, comments about the meter, and each `with meter.step(...):` line, whose
    block moves out one level), and how many lines that took away."""
    lines = source.splitlines()
    drop: set[int] = set()  # 0-based line numbers
    dedent: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.With) and _is_meter_code(node.items[0].context_expr):
            drop.add(node.lineno - 1)
            dedent.update(range(node.body[0].lineno - 1, node.end_lineno or node.lineno))
        elif isinstance(node, (ast.Import, ast.Assign, ast.Expr)) and _is_meter_code(node):
            drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    drop.update(i for i, line in enumerate(lines) if METER_COMMENT.match(line))
    kept = [line[4:] if i in dedent else line for i, line in enumerate(lines) if i not in drop]
    return "\n".join(kept) + "\n", len(drop)


@pytest.mark.parametrize(
    ("script", "args"),
    [
        (GPT, ["--max-steps", "2", "--n-layer", "1", "--n-embd", "16", "--train-chars", "2000"]),
        pytest.param(FABRIC, ["--max-steps", "2", "--train-samples", "256"], marks=NEEDS_FABRIC),
    ],
)
def test_an_example_is_an_ordinary_script_but_for_five_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: Path, args: list[str]
) -> None:
    plain, removed = without_meter(script.read_text())
    assert 1 <= removed <= 5, f"{script.name}: {removed} lines of trainscale"
    tree = ast.parse(plain)  # still a valid script, with nothing of trainscale left in it
    assert not [node for node in ast.walk(tree) if _is_meter_code(node)]
    # ...that trains as it is, under plain python (one process).
    copy = tmp_path / script.name
    copy.write_text(plain)
    monkeypatch.setattr(sys, "argv", [str(copy), *args])
    with mock.patch.dict(os.environ):  # what the script sets (Fabric's seed) goes with it
        for name in ("WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
            os.environ.pop(name, None)
        runpy.run_path(str(copy), run_name="__main__")
    assert meter_module._active is None
