"""benchmarks/simulator_one_device.py, the held-out check the GPU check runs: each workload's
step predicted without its own runs. On fixture runs whose steps a per-operator and
per-FLOP rate made, every held-out prediction lands on the measured step."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from trainscale.results.store import RunStore
from trainscale.simulator.setup import cached_layout

from tests.helpers.simulate import MACHINE, add_measured_run, run_id

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "simulator_one_device.py"
PER_STEP, PER_OP, PER_FLOP = 2e-3, 30e-6, 1 / 2e11
FLOPS = {
    "cifar10-resnet44": 582_160_128,
    "mnist-cnn": 71_565_312,
    "mnist-dbn": 6_000_000,
    "tweets-text": 20_000_000,
}


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("simulator_one_device", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_each_workload_is_predicted_from_the_others_alone(script, tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        for n, (name, flops) in enumerate(FLOPS.items()):
            ops = cached_layout(name, None, "cpu").ops_per_step
            step = PER_STEP + PER_OP * ops + PER_FLOP * flops * 64
            add_measured_run(
                store, run_id(n), workload=name, step_s=step, flops_per_sample=flops, env=MACHINE
            )
        rows = script.held_out(store, "cpu")
    assert [r["workload"] for r in rows] == sorted(FLOPS)
    for row in rows:
        assert row["held_out_relative_error"] == pytest.approx(0, abs=0.05)
        assert "uncalibrated_step_s" not in row and "no peak_flops" in row["uncalibrated_error"]
        others = set(FLOPS) - {row["workload"]}
        assert all(name in row["held_out_note"] for name in others)
