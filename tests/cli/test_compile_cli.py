"""`trainscale run --compile` on a CPU, for real: TorchInductor builds C++ kernels for the
model and the step's loss, off the training clock, and the run trains as the eager one does."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from trainscale.cli import main
from trainscale.results.store import RunStore

from tests.helpers.custom_workloads import fresh_custom_workloads  # noqa: F401  (a fixture)

pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX") or "g++") is None,
    reason="TorchInductor needs a C++ compiler ($CXX, else g++) for CPU kernels",
)

# No dropout (Inductor draws its own random numbers, so runs with dropout differ), and label
# smoothing, which the compiled loss must keep.
WORKLOAD = """
import numpy as np
from torch import nn

from trainscale.workloads import Recipe, array_workload


def make_workload():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    return array_workload(
        "compiled-mlp",
        model=lambda meta: nn.Sequential(
            nn.Linear(meta["num_features"], 32), nn.ReLU(), nn.Linear(32, meta["num_classes"])
        ),
        train=(x[:384], y[:384]),
        test=(x[384:], y[384:]),
        recipe=Recipe(optimizer="adam", lr=0.01, batch_size=32, epochs=1, label_smoothing=0.1),
        target_accuracy=0.9,
    )
"""


def _run(workload: str, store_path, capsys, *extra: str) -> tuple[dict, list[dict]]:
    args = ["run", workload, "--steps", "12", "--workers", "1", "--threads-per-worker", "1"]
    args += ["--quiet", "--json", "--store", str(store_path), *extra]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    with RunStore(store_path) as store:
        return result, store.epochs(result["run_id"])


@pytest.mark.usefixtures("fresh_custom_workloads")
def test_a_compiled_run_is_timed_apart_and_trains_as_the_eager_run_does(
    tmp_path, store_path, capsys
):
    path = tmp_path / "compiled_mlp.py"
    path.write_text(WORKLOAD)
    workload = f"{path}:make_workload"
    eager, eager_epochs = _run(workload, store_path, capsys)
    compiled, compiled_epochs = _run(workload, store_path, capsys, "--compile")
    assert compiled["status"] == "completed" and compiled["config"]["compile"] is True
    assert compiled["config"]["label_smoothing"] == 0.1
    assert compiled["compile_time_s"] > 0 and eager["compile_time_s"] is None
    # The same seed, data and recipe: the same losses, up to the fused kernels' rounding.
    assert compiled_epochs[0]["train_loss"] == pytest.approx(
        eager_epochs[0]["train_loss"], rel=1e-4
    )
    assert compiled["test_accuracy"] == pytest.approx(eager["test_accuracy"], abs=0.01)
