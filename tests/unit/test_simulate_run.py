"""`simulate.run`: the simulator's questions as library calls on a fixture store."""

from __future__ import annotations

import json

import pytest

from trainscale.cli import main
from trainscale.errors import ConfigError, TrainscaleError
from trainscale.results.store import RunStore
from trainscale.simulate.run import (
    ScalingResult,
    check_simulation_inputs,
    cluster_presets,
    simulate_scaling,
    time_to_accuracy,
    validate_simulator,
)

from tests.helpers.simulate import add_emulation, add_measured_run, run_id

BREAKDOWN = {"data": 0.001, "forward": 0.03, "backward": 0.06, "optimizer": 0.009}


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "sim.db"
    with RunStore(path) as store:
        add_measured_run(store, run_id(1), batch_size=64, step_s=0.1, breakdown=BREAKDOWN)
        add_measured_run(store, run_id(3), workers=2, batch_size=32, step_s=0.055)
        for n, workers in enumerate((1, 2)):
            add_emulation(
                store, run_id(10 + n), workers=workers, per_worker_batch=64, steps_to_target=900
            )
    return path


def test_scaling_on_a_preset_matches_the_command_json(store_path, tmp_path, capsys):
    result = simulate_scaling(
        "mnist-cnn", cluster="cpu-25gbe", workers="1,2", samples=200, store=store_path
    )
    assert isinstance(result, ScalingResult)
    assert [p.workers for p in result.predictions] == [1, 2] and result.plots == []
    argv = ["simulate", "mnist-cnn", "--cluster", "cpu-25gbe", "--workers", "1,2"]
    assert main([*argv, "--samples", "200", "--store", str(store_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(result.to_dict()))
    plotted = simulate_scaling(
        "mnist-cnn", cluster="cpu-25gbe", workers=[1, 2], samples=200, plot_dir=tmp_path / "p"
    )
    assert plotted.plots and all((tmp_path / "p").joinpath(p).exists() for p in plotted.plots)


def test_validation_and_time_to_accuracy_read_the_store(store_path):
    report = validate_simulator(samples=200, store=store_path).report
    assert [row.run_id for row in report.rows] == [run_id(3)]
    rows = time_to_accuracy("mnist-cnn", cluster="cpu-25gbe", samples=200, store=store_path).rows
    assert sorted(row.setting.workers for row in rows) == [1, 2]
    with pytest.raises(TrainscaleError, match="no completed emulation of mnist-cnn with tag"):
        time_to_accuracy("mnist-cnn", emulation="nope", store=store_path)


def test_inputs_are_checked_in_one_line_each():
    with pytest.raises(ConfigError, match="--batch-size must be at least 1, got 0"):
        check_simulation_inputs(batch_size=0, samples=0)
    with pytest.raises(ConfigError, match="--samples must be at least 1"):
        check_simulation_inputs(samples=0)
    with pytest.raises(ConfigError, match=r"--straggler-sigma must be in \[0, 5\), got 5"):
        simulate_scaling("mnist-cnn", straggler_sigma=5)
    presets = cluster_presets()
    assert "cpu-25gbe" in {p.name for p in presets.presets}
    assert presets.to_dict()["generated"] == ["local"]
