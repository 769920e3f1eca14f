"""`trainscale.meter(model=model)`: the sizes of the model's trainable parameters recorded in
registration order, stored with rank 0's summary, and laid out again as DDP's buckets by the
simulator; the no-op meter ignores the keyword without loading torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

import trainscale
from trainscale.results.stored_settings import StoredSettings
from trainscale.simulator.buckets import (
    layout_from_params,
    param_infos,
    recorded_layout,
)
from trainscale.simulator.calibrate import CalibrationError
from trainscale.simulator.run_facts import per_worker_batch
from trainscale.simulator.script_calibration import script_layout, script_name
from trainscale.train import meter as meter_module
from trainscale.train.meter import NullMeter, ScriptMeasurements
from trainscale.train.script_summary import summarize_script


def _model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(50, 8), nn.Linear(8, 300), nn.ReLU(), nn.Linear(300, 4))
    model[0].weight.requires_grad_(False)  # frozen: DDP has no gradient of it to bucket
    model[3].to(torch.bfloat16)
    return model


@pytest.fixture
def active():
    meter = meter_module.activate()
    yield meter
    meter_module.deactivate()


def test_the_active_meter_records_trainable_sizes_in_registration_order(active) -> None:
    assert trainscale.meter(model=_model()) is active
    assert active.measurements.model_parameters == [
        {"numel": 8 * 300, "dtype": "float32", "bytes": 4 * 8 * 300},
        {"numel": 300, "dtype": "float32", "bytes": 4 * 300},
        {"numel": 300 * 4, "dtype": "bfloat16", "bytes": 2 * 300 * 4},
        {"numel": 4, "dtype": "bfloat16", "bytes": 2 * 4},
    ]
    # A DDP-style wrapper holds the same parameters: the same sizes.
    wrapped = nn.Module()
    wrapped.module = _model()
    trainscale.meter(model=wrapped)
    assert len(active.measurements.model_parameters) == 4
    assert trainscale.meter() is active  # without the keyword, as before
    with pytest.raises(TypeError, match=r"takes the torch\.nn\.Module the script trains, not list"):
        trainscale.meter(model=[1, 2])


def test_the_no_op_meter_takes_model_and_loads_no_torch() -> None:
    assert isinstance(trainscale.meter(model=object()), NullMeter)
    code = (
        "import sys, trainscale\n"
        "m = trainscale.meter(model=object())\n"
        "with m.step(samples=1): pass\n"
        "assert 'torch' not in sys.modules, 'torch loaded'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _measured(parameters):
    return ScriptMeasurements(
        step_times_s=[0.1, 0.1],
        data_wait_s=[0.0, 0.01],
        samples=[8, 8],
        model_parameters=parameters,
    )


def test_rank_zeros_sizes_go_into_the_summarys_extra_keys() -> None:
    sizes = [{"numel": 10, "dtype": "float32", "bytes": 40}]
    workers = [{"peak_rss_bytes": 1}, {"peak_rss_bytes": 1}]
    summary = summarize_script([_measured(sizes), _measured(None)], workers, 0, None)
    assert summary.extra["model_parameters"] == sizes
    without = summarize_script([_measured(None)], workers[:1], 0, None)
    assert "model_parameters" not in without.extra


@pytest.mark.parametrize("cap_mb", [None, 0.002])
def test_recorded_sizes_make_the_buckets_of_the_model_itself(active, cap_mb) -> None:
    model = _model()
    trainscale.meter(model=model)
    recorded = recorded_layout(active.measurements.model_parameters, cap_mb)
    built = layout_from_params(param_infos(model), cap_mb, "parameters")
    assert recorded.buckets == built.buckets
    assert (recorded.total_bytes, recorded.num_params) == (built.total_bytes, built.num_params)
    assert len(recorded.buckets) == (1 if cap_mb is None else 2)


class _Record:
    """The parts of a stored run these functions read."""

    short_id = "abcd1234"
    workload = "script:train.py"

    def __init__(self, summary=None, config=None, world_size=1, global_batch_size=64):
        self.summary = summary or {}
        self.config = config or {"script": "/a/train.py"}
        self.settings = StoredSettings.of(self.config)
        self.world_size = world_size
        self.global_batch_size = global_batch_size


def test_a_run_without_sizes_says_to_pass_the_model() -> None:
    with pytest.raises(CalibrationError, match=r"meter = trainscale\.meter\(model=model\)"):
        script_layout(_Record(), None)
    with pytest.raises(CalibrationError, match="parameter 0 has no size"):
        script_layout(_Record({"model_parameters": [{"dtype": "float32"}]}), None)


def test_a_script_runs_worker_batch_is_its_share_of_the_measured_batch() -> None:
    assert per_worker_batch(_Record(world_size=2, global_batch_size=128)) == 64
    assert per_worker_batch(_Record(config={"batch_size": 32}, world_size=2)) == 32


def test_script_targets_by_stored_name_or_path(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import trainscale\nmeter = trainscale.meter()\n")
    assert script_name("script:train.py") == "script:train.py"
    assert script_name(str(script)) == "script:train.py"
    assert script_name("mnist-cnn") is None
