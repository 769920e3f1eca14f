"""`--profile DIR`: PyTorch's profiler over a run's first steps, its files per worker, and
the option's checks (a setting of its own, PyTorch's only, a directory made up front)."""

from __future__ import annotations

import gzip
import json
from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.runner.resolve import make_profile_dir, resolve
from trainscale.train.profiling import EVALUATION_MARK, profile_files, step_lines
from trainscale.train.trainer import train

from tests.helpers.tiny import tiny_config, tiny_data, tiny_workload


def _train(**changes: object):
    config = tiny_config(**changes)
    return train(config, tiny_workload(), tiny_data(), make_strategy(config, DistEnv()))


def test_a_profiled_run_writes_the_trace_operators_and_times_of_its_first_steps(tmp_path):
    # 6 steps, evaluated after steps 2, 4 and 6.
    outcome = _train(profile=str(tmp_path / "prof"), profile_steps=3, eval_every=2, steps=6)
    assert outcome.metrics.num_steps == 6  # profiling changes nothing in what is trained
    files = profile_files(tmp_path / "prof", rank=0)
    steps = files["steps"].read_text().splitlines()
    assert [line.split(":")[0] for line in steps] == [
        "ProfilerStep#0 (step 1)",
        "ProfilerStep#1 (step 2)",
        "ProfilerStep#2 (step 3)",
    ]
    # Step 2's span holds the evaluation after it, marked; the others have none.
    assert ["of which evaluation" in line for line in steps] == [False, True, False]
    trace = json.loads(gzip.decompress(files["trace"].read_bytes()))
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"ProfilerStep#0", "ProfilerStep#2", EVALUATION_MARK} <= names
    assert "ProfilerStep#3" not in names  # only the steps asked for
    ops = files["ops"].read_text()  # PyTorch's table, its operators by self CPU time
    assert "Self CPU" in ops and "aten::" in ops


def test_a_run_shorter_than_its_profile_writes_the_steps_it_took(tmp_path):
    _train(profile=str(tmp_path), profile_steps=50, evaluate=False, steps=6)
    lines = profile_files(tmp_path, rank=0)["steps"].read_text().splitlines()
    assert len(lines) == 6 and lines[-1].startswith("ProfilerStep#5 (step 6): ")


def test_without_the_option_nothing_is_profiled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _train()
    assert list(tmp_path.iterdir()) == []


def _event(
    name: str, start_us: float, end_us: float, device: DeviceType = DeviceType.CPU
) -> SimpleNamespace:
    span = SimpleNamespace(start=start_us, end=end_us)
    return SimpleNamespace(name=name, time_range=span, device_type=device)


def test_step_lines_give_each_steps_span_and_the_evaluation_inside_it():
    events = [
        _event("ProfilerStep*", 2_000, 2_500),
        _event("ProfilerStep*", 0, 1_500),
        _event(EVALUATION_MARK, 2_100, 2_400),
        _event("aten::mm", 10, 20),
        # On a GPU each annotation comes twice: the host's span and the device's (which may
        # be longer, queued work included). Only the host's is the step's host time.
        _event("ProfilerStep*", 40, 1_900, DeviceType.CUDA),
        _event("ProfilerStep*", 2_010, 2_900, DeviceType.CUDA),
        _event(EVALUATION_MARK, 2_110, 2_410, DeviceType.CUDA),
    ]
    assert step_lines(events) == (
        "ProfilerStep#0 (step 1): 1.500 ms\n"
        "ProfilerStep#1 (step 2): 0.500 ms, of which evaluation 0.300 ms\n"
    )


def test_a_profiled_run_is_a_setting_of_its_own_and_earlier_hashes_hold():
    plain = resolve(RunOptions.of("mnist-cnn"), available_cores=[0])
    profiled = resolve(RunOptions.of("mnist-cnn", profile="prof"), available_cores=[0])
    assert profiled.settings_hash() != plain.settings_hash()
    # Runs stored before the option existed had neither key: their hashes are unchanged.
    flat = plain.flat()
    assert flat["profile"] is None and flat["profile_steps"] == 20
    assert RunOptions.of("mnist-cnn", profile=".", profile_steps=5).measurement.profile_steps == 5


def test_settings_that_cannot_apply_are_refused_not_ignored():
    with pytest.raises(ConfigError, match="--profile-steps 5 is a setting of --profile DIR"):
        RunOptions.of("mnist-cnn", profile_steps=5)
    with pytest.raises(ConfigError, match="--eval-every is how often to evaluate: it cannot go"):
        RunOptions.of("mnist-cnn", evaluate=False, eval_every=5)


@pytest.mark.parametrize("steps", [0, -3])
def test_profile_steps_must_be_positive(steps):
    with pytest.raises(ConfigError, match="--profile-steps must be a positive number"):
        RunOptions.of("mnist-cnn", profile=".", profile_steps=steps)


def test_another_frameworks_run_is_refused_in_one_line():
    options = RunOptions.of("mnist-cnn", framework="jax", profile="prof")
    with pytest.raises(ConfigError, match="--profile is a PyTorch setting") as refused:
        resolve(options, available_cores=[0])
    assert "\n" not in str(refused.value)


def test_a_profile_path_that_cannot_be_a_directory_fails_before_the_run(tmp_path):
    taken = tmp_path / "a-file"
    taken.write_text("x")
    with pytest.raises(ConfigError, match=r"--profile .*a-file/prof: cannot make it a dir"):
        make_profile_dir(str(taken / "prof"))
    make_profile_dir(str(tmp_path / "new" / "prof"))
    assert (tmp_path / "new" / "prof").is_dir()
