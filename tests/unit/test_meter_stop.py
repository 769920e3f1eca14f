"""The meter's step limit (the bench's fixed-length script rungs) and the check that a script
on several workers formed a process group: the script stopped after the same step on every
rank, its `except Exception` and `finally` as they are, and the stop a normal end."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch.distributed as dist

from trainscale.errors import WorkloadError
from trainscale.runner.script_exec import run_script
from trainscale.train.meter import StepLimitReached, StepMeter, activate, deactivate

LOOP = """\
import trainscale
meter = trainscale.meter()
done = []
try:
    for step in range(100):
        try:
            with meter.step(samples=4):
                pass
        except Exception:  # a script's own error handling: not for the limit
            done.append("swallowed")
finally:
    done.append("finally")
    open(__file__ + ".out", "w").write(" ".join(done))
"""


@pytest.fixture(autouse=True)
def _inactive() -> None:
    yield
    deactivate()


def test_the_meter_stops_at_the_end_of_the_step_that_reaches_the_limit() -> None:
    meter = StepMeter(max_steps=3)
    ran = 0
    with pytest.raises(StepLimitReached):
        for _ in range(10):
            with meter.step(samples=2):
                ran += 1  # the limit's own step trains whole
    assert ran == 3
    assert meter.measurements.samples == [2, 2, 2]
    # A script that caught the stop and goes on is stopped again, before another step.
    with pytest.raises(StepLimitReached), meter.step(samples=2):
        ran += 1
    assert ran == 3 and len(meter.measurements.step_times_s) == 3


def test_the_stop_is_no_exception_a_script_swallows() -> None:
    assert not issubclass(StepLimitReached, Exception)
    with pytest.raises(ValueError, match="whole number"):
        activate(max_steps=0)


def test_a_limited_script_ends_normally_through_its_finally(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    measurements = run_script(str(script), [], max_steps=5)
    assert len(measurements.step_times_s) == 5
    assert (tmp_path / "train.py.out").read_text() == "finally"  # nothing swallowed
    # A script shorter than the limit trains its own steps, as without one.
    assert len(run_script(str(script), [], max_steps=500).step_times_s) == 100


def _line_without_a_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: str) -> str:
    """The line of a 2-worker script run on `device` that forms no process group."""
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(WorkloadError) as error:
        run_script(str(script), [], device=device)
    return str(error.value)


def test_several_workers_without_a_process_group_stop_after_the_first_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _line_without_a_group(tmp_path, monkeypatch, "cpu")
    assert line.startswith(
        "the script trained 1 step on each of 2 workers without a process group "
        "(torch.distributed is not initialized): each worker would train alone"
    )
    assert "\n" not in line and "--workers 1" in line
    assert (tmp_path / "train.py.out").read_text() == "finally"  # not swallowed either


def test_the_advice_names_the_backend_of_the_run_s_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_cpu = _line_without_a_group(tmp_path, monkeypatch, "cpu")
    assert 'init_process_group("gloo")' in on_cpu and "nccl" not in on_cpu
    line = _line_without_a_group(tmp_path, monkeypatch, "cuda")
    assert 'init_process_group("nccl")' in line and "gloo" not in line
    assert "DistributedDataParallel(model, device_ids=[local_rank])" in line
    assert "\n" not in line and "--workers 1" in line


def test_the_group_check_passes_a_script_that_formed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    assert len(run_script(str(script), [], max_steps=4).step_times_s) == 4
    monkeypatch.setenv("WORLD_SIZE", "1")  # one worker needs no group
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    assert len(run_script(str(script), [], max_steps=4).step_times_s) == 4
