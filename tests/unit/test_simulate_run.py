"""`simulator.run`: the simulator's questions as library calls on a fixture store."""

from __future__ import annotations

import json

import pytest

from trainscale.cli import main
from trainscale.errors import ConfigError, TrainscaleError
from trainscale.results.store import RunStore
from trainscale.simulator.options import (
    MonteCarloOptions,
    ScalingOptions,
    StepModelOptions,
)
from trainscale.simulator.run import (
    ScalingResult,
    cluster_presets,
    simulate_scaling,
    time_to_accuracy,
    validate_simulator,
)

from tests.helpers.simulate import add_emulation, add_measured_run, run_id

PRESET = StepModelOptions(cluster="cpu-25gbe")
FEW = MonteCarloOptions(samples=200)
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
    scaling = ScalingOptions(workers=(2, 1, 2))
    result = simulate_scaling(
        "mnist-cnn", model=PRESET, scaling=scaling, monte_carlo=FEW, store=store_path
    )
    assert isinstance(result, ScalingResult)
    assert [p.workers for p in result.predictions] == [1, 2] and result.plots == []
    argv = ["simulate", "mnist-cnn", "--cluster", "cpu-25gbe", "--workers", "1,2"]
    assert main([*argv, "--samples", "200", "--store", str(store_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(result.to_dict()))
    plotted = simulate_scaling(
        "mnist-cnn",
        model=PRESET,
        scaling=scaling,
        monte_carlo=FEW,
        store=store_path,
        plot_dir=tmp_path / "p",
    )
    assert plotted.plots and all((tmp_path / "p").joinpath(p).exists() for p in plotted.plots)


def test_validation_and_time_to_accuracy_read_the_store(store_path):
    report = validate_simulator(monte_carlo=FEW, store=store_path).report
    assert [row.run_id for row in report.rows] == [run_id(3)]
    rows = time_to_accuracy("mnist-cnn", model=PRESET, monte_carlo=FEW, store=store_path).rows
    assert sorted(row.setting.workers for row in rows) == [1, 2]
    with pytest.raises(TrainscaleError, match="no completed emulation of mnist-cnn with tag"):
        time_to_accuracy("mnist-cnn", emulation="nope", store=store_path)


def test_inputs_are_checked_in_one_line_each_when_made():
    with pytest.raises(ConfigError, match="--batch-size must be at least 1, got 0"):
        ScalingOptions(batch_size=0)
    with pytest.raises(ConfigError, match="--workers takes whole numbers >= 1"):
        ScalingOptions(workers=(1, 0))
    with pytest.raises(ConfigError, match="--batch-size or --global-batch-size, not both"):
        ScalingOptions(batch_size=8, global_batch_size=16)
    with pytest.raises(
        ConfigError,
        match="--bucket-cap-mb must be positive and at most 1,048,576 \\(a TiB\\), got 0",
    ):
        ScalingOptions(bucket_cap_mb=0)
    with pytest.raises(ConfigError, match="--samples must be at least 1"):
        MonteCarloOptions(samples=0)
    with pytest.raises(ConfigError, match=r"--straggler-sigma must be in \[0, 5\), got 5"):
        StepModelOptions(straggler_sigma=5)
    with pytest.raises(ConfigError, match="--threads-per-worker must be at least 1"):
        StepModelOptions(threads_per_worker=0)
    assert StepModelOptions(calibrate_from="abc").calibrate_from == ("abc",)
    presets = cluster_presets()
    assert "cpu-25gbe" in {p.name for p in presets.presets}
    assert presets.to_dict()["generated"] == ["local"]


@pytest.mark.parametrize(
    ("model", "flag"),
    [
        (StepModelOptions(nodes=2), "--nodes"),
        (StepModelOptions(precision="bf16"), "--precision"),
        (StepModelOptions(algorithm="tree"), "--algorithm"),
        (StepModelOptions(device="cuda"), "--device"),
    ],
)
def test_a_validation_refuses_what_only_a_prediction_uses(store_path, model, flag):
    # Each run is predicted on its own machine at its own precision: a prediction's option
    # given to a validation would be ignored, so it is refused by name.
    with pytest.raises(ConfigError, match=f"^{flag} is for predictions"):
        validate_simulator(model=model, monte_carlo=FEW, store=store_path)


def test_emulation_runs_takes_one_emulation_by_its_id_or_an_unambiguous_prefix():
    from types import SimpleNamespace

    from trainscale.errors import ConfigError
    from trainscale.simulator.run import emulation_runs

    runs = [
        SimpleNamespace(tag=tag)
        for tag in ("emulate:9a1b", "emulate:9a1b", "emulate:9c2d", "bench:9a1b", None)
    ]
    assert len(emulation_runs(runs, "9a")) == 2
    assert len(emulation_runs(runs, " 9c2d ")) == 1
    with pytest.raises(ConfigError, match=r"--emulation 9 names 2 emulations \(9a1b, 9c2d\)"):
        emulation_runs(runs, "9")
    with pytest.raises(ConfigError, match="needs an emulation id"):
        emulation_runs(runs, " ")
