"""A script run on a GPU, as far as a CPU can check it: the meter's device clock (marks the
device has not passed read at `evaluate()` and at the script's end, step times that add up
to the training clock, the data wait as the device's idle gap between a step's end and the
next step's start), the clock chosen at the first step, the worker's GPU made current, and
`--device` resolved in the parent (cuda on a machine without a GPU: one line, exit 2,
nothing stored)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.runner import script_exec
from trainscale.runner.script_exec import run_script, use_local_gpu
from trainscale.runner.script_launch import prepare_script
from trainscale.train.meter import DeviceClock, HostClock, StepMeter, deactivate, script_clock
from trainscale.train.timing import CudaStepClock

from tests.helpers.cli import one_error_line, run_cli


class FakeDeviceClock:
    """A device clock whose marks read the time the test sets, and only once settled: a
    read before `settle()` fails, as a CUDA event's would stall or fail (a device that
    passes its marks in its own time: tests/unit/test_meter_pending.py)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.times: list[float] = []
        self.settled = 0  # marks readable so far
        self.settles = 0

    def mark(self) -> int:
        self.times.append(self.now)
        return len(self.times) - 1

    def seconds(self, start: int, end: int) -> float:
        assert max(start, end) < self.settled, "a mark read before the clock settled"
        return self.times[end] - self.times[start]

    def passed(self, mark: int) -> bool:
        return mark < self.settled

    def wait(self, mark: int) -> None:
        raise AssertionError("a wait for the device in a step")

    def settle(self) -> None:
        self.settles += 1
        self.settled = len(self.times)


def _step(meter: StepMeter, clock: FakeDeviceClock, start: float, end: float) -> None:
    clock.now = start
    with meter.step(samples=8):
        clock.now = end


@pytest.fixture(autouse=True)
def _inactive() -> None:
    yield
    deactivate()


def test_marks_the_device_has_not_passed_are_read_at_evaluate_and_at_the_end() -> None:
    clock = FakeDeviceClock()
    meter = StepMeter(clock=clock)
    _step(meter, clock, 0.0, 1.0)
    _step(meter, clock, 1.0, 2.0)
    m = meter.measurements
    assert clock.settles == 0 and m.step_times_s == [] and m.samples == [8, 8]
    clock.now = 2.5
    meter.evaluate(accuracy=0.5)
    assert clock.settles == 1
    assert m.step_times_s == [1.0, 1.0]
    assert m.curve == [(2.0, 2, 0.5)]  # the training clock of both steps, read first
    assert m.eval_time_s == 0.5
    _step(meter, clock, 2.5, 3.0)
    assert clock.settles == 1 and len(m.step_times_s) == 2
    meter.settle()  # the script's end
    assert clock.settles == 2 and m.step_times_s == [1.0, 1.0, 0.5]
    meter.settle()  # nothing pending: no second wait for the device
    assert clock.settles == 2


def test_step_times_add_up_and_the_data_wait_is_the_device_idle_gap() -> None:
    clock = FakeDeviceClock()
    meter = StepMeter(clock=clock)
    _step(meter, clock, 10.0, 11.0)  # the first step: no boundary before it, no wait
    _step(meter, clock, 11.0, 12.0)  # the host ran ahead: the start follows the end at once
    _step(meter, clock, 12.25, 13.0)  # the device stood idle 0.25 s for the next batch
    clock.now = 14.0
    meter.evaluate(accuracy=0.25)
    _step(meter, clock, 14.5, 15.0)  # after an evaluation the wait starts at its end
    meter.settle()
    m = meter.measurements
    assert m.data_wait_s == [0.0, 0.0, 0.25, 0.5]
    assert m.step_times_s == [1.0, 1.0, 1.0, 1.0]
    # The device's span, less the evaluation: every moment on the clock is in one step.
    assert m.train_clock_s == pytest.approx((15.0 - 10.0) - m.eval_time_s)
    assert m.eval_time_s == 1.0


LOOP = """\
import trainscale
meter = trainscale.meter()
for step in range(5):
    with meter.step(samples=4):
        pass
"""


def test_the_script_runner_hands_over_every_step_read(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    clock = FakeDeviceClock()
    measurements = run_script(str(script), [], clock=clock)
    assert clock.settles == 1  # once, when the script has ended
    assert len(measurements.step_times_s) == len(measurements.data_wait_s) == 5
    # Stopped at the run's step limit: the steps it trained are read all the same.
    clock = FakeDeviceClock()
    assert len(run_script(str(script), [], max_steps=3, clock=clock).step_times_s) == 3


class FakeEvent:
    """torch.cuda.Event's part the clock uses, on a CPU: the time of `record()`."""

    now = 0.0
    synchronized = 0
    recorded: list[FakeEvent] = []

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.time: float | None = None

    def record(self) -> None:
        self.time = FakeEvent.now
        FakeEvent.recorded.append(self)

    def elapsed_time(self, end: FakeEvent) -> float:  # milliseconds, as CUDA's
        assert FakeEvent.synchronized, "an event read before the device synchronised"
        assert self.time is not None and end.time is not None
        return (end.time - self.time) * 1000.0

    def query(self) -> bool:  # the device is busy until the test synchronises it
        return bool(FakeEvent.synchronized)

    def synchronize(self) -> None:
        raise AssertionError("a wait for the device in a step")


def _cuda_in_use(monkeypatch: pytest.MonkeyPatch, initialized: bool) -> None:
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(FakeEvent, "recorded", [])
    monkeypatch.setattr(FakeEvent, "synchronized", 0)

    def synchronize(device: Any = None) -> None:
        FakeEvent.synchronized += 1

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)


def test_a_script_on_cuda_is_timed_with_events_from_its_first_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _cuda_in_use(monkeypatch, initialized=True)
    meter = StepMeter()
    assert meter.clock is None  # nothing decided before the script's first step
    for start, end in ((0.0, 0.5), (0.5, 1.0), (1.2, 1.5)):
        FakeEvent.now = start
        with meter.step(samples=2):
            FakeEvent.now = end
    assert isinstance(meter.clock, DeviceClock)
    assert isinstance(meter.clock.events, CudaStepClock)
    assert len(FakeEvent.recorded) == 6 and FakeEvent.synchronized == 0
    FakeEvent.now = 2.0
    meter.evaluate(accuracy=0.1)
    assert FakeEvent.synchronized == 1
    m = meter.measurements
    assert m.step_times_s == pytest.approx([0.5, 0.5, 0.5])  # ms read back as seconds
    assert m.data_wait_s == pytest.approx([0.0, 0.0, 0.2])


def test_a_script_without_cuda_is_timed_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    _cuda_in_use(monkeypatch, initialized=False)
    assert isinstance(script_clock(), HostClock)
    meter = StepMeter()
    with meter.step(samples=2):
        pass
    assert isinstance(meter.clock, HostClock) and not FakeEvent.recorded
    assert len(meter.measurements.step_times_s) == 1  # host marks are read at once
    monkeypatch.delitem(sys.modules, "torch")  # a script that never imported torch
    assert isinstance(script_clock(), HostClock)


def test_the_worker_gpu_is_made_current_on_a_cuda_run_and_hidden_on_a_cpu_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chosen: list[int] = []
    monkeypatch.setattr(script_exec.torch.cuda, "set_device", chosen.append)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # as torchrun leaves it
    use_local_gpu("cpu", 1)
    # A script choosing "cuda" when torch.cuda.is_available() trains on the CPU measured.
    assert chosen == [] and os.environ["CUDA_VISIBLE_DEVICES"] == ""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    use_local_gpu("cuda", 1)
    assert chosen == [1] and os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"  # every GPU visible


def _gpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_the_parent_resolves_the_device_as_for_a_builtin_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    _gpus(monkeypatch, 2)
    run = prepare_script(str(script), [], RunOptions.of("train.py", device="cuda"))
    assert run.parallel.device == run.flat()["device"] == "cuda"
    auto = RunOptions.of("train.py", device="auto")
    assert prepare_script(str(script), [], auto).parallel.device == "cuda"
    three = RunOptions.of("train.py", device="cuda", workers=3, allow_oversubscribe=True)
    with pytest.raises(ConfigError, match="3 GPU workers on this machine but only 2"):
        prepare_script(str(script), [], three)
    _gpus(monkeypatch, 0)
    assert prepare_script(str(script), [], auto).parallel.device == "cpu"


def test_cuda_without_a_gpu_is_one_line_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    _gpus(monkeypatch, 0)
    store = tmp_path / "runs.db"
    capsys.readouterr()
    args = ["run", str(script), "--device", "cuda", "--store", str(store), "--", "--x"]
    assert run_cli(args) == 2
    assert "--device cuda, but no CUDA GPU is visible to torch" in one_error_line(capsys)
    assert not store.exists()
