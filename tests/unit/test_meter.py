"""trainscale.meter(): a no-op outside a script run; under one, steps, data waits and
evaluations timed by the loop's rule (a step's end is the next step's start)."""

from __future__ import annotations

import time

import pytest

import trainscale
from trainscale.train import meter as meter_module
from trainscale.train.meter import NullMeter, StepMeter, activate, deactivate


@pytest.fixture
def active() -> StepMeter:
    try:
        yield activate()
    finally:
        deactivate()


def test_outside_a_script_run_the_meter_does_nothing() -> None:
    meter = trainscale.meter()
    assert isinstance(meter, NullMeter)
    ran = []
    with meter.step(samples=8):
        ran.append(1)
    meter.evaluate(accuracy=0.5)
    assert ran == [1]
    assert meter_module._active is None


def test_the_active_meter_is_what_the_script_gets(active: StepMeter) -> None:
    assert trainscale.meter() is active


def test_steps_include_their_data_wait_and_evaluation_is_off_the_clock(
    active: StepMeter,
) -> None:
    with active.step(samples=4):
        time.sleep(0.01)
    time.sleep(0.05)  # the "DataLoader" fetching the next batch
    with active.step(samples=3):
        time.sleep(0.01)
    time.sleep(0.08)  # evaluating
    active.evaluate(accuracy=0.75, loss=0.4)
    with active.step(samples=4):
        pass
    m = active.measurements
    assert m.samples == [4, 3, 4]
    assert m.data_wait_s[0] == 0.0
    assert m.data_wait_s[1] >= 0.05
    assert m.step_times_s[1] >= m.data_wait_s[1] + 0.01
    # The evaluation's time is neither the next step's wait nor on the training clock.
    assert m.data_wait_s[2] < 0.05
    assert m.eval_time_s >= 0.08
    assert m.train_clock_s == pytest.approx(sum(m.step_times_s))
    clock, steps, accuracy = m.curve[0]
    assert (steps, accuracy, m.last_loss) == (2, 0.75, 0.4)
    assert clock == pytest.approx(sum(m.step_times_s[:2]))


@pytest.mark.parametrize("samples", [-1, 2.5, True, "8"])
def test_a_step_needs_a_count_of_samples(active: StepMeter, samples: object) -> None:
    with pytest.raises(ValueError, match="count of samples"), active.step(samples=samples):  # type: ignore[arg-type]
        pass


@pytest.mark.parametrize(
    ("accuracy", "fragment"),
    [
        (97.5, r"not 97\.5 \(a percentage\? divide it by 100\)"),
        (float("nan"), "not nan"),
        (-0.1, r"not -0\.1$"),
        (True, "not True"),
    ],
)
def test_an_accuracy_is_a_fraction(active: StepMeter, accuracy: object, fragment: str) -> None:
    with active.step(samples=4):
        pass
    with pytest.raises(ValueError, match=rf"takes a fraction in \[0, 1\], {fragment}"):
        active.evaluate(accuracy=accuracy)  # type: ignore[arg-type]
    assert active.measurements.curve == []  # nothing recorded
    active.evaluate(accuracy=1.0)  # the bounds are fractions too
    active.evaluate(accuracy=0)


def test_steps_do_not_nest_and_an_evaluation_waits_for_the_steps_end(active: StepMeter) -> None:
    # Wrapped twice (gradient accumulation's micro-batches inside the optimizer step), the
    # inner marks would cut the outer step in two: negative data waits, the samples twice.
    with (
        active.step(samples=32),
        pytest.raises(ValueError, match="do not nest"),
        active.step(samples=8),
    ):
        pass
    with active.step(samples=32), pytest.raises(ValueError, match="inside a meter.step"):
        active.evaluate(accuracy=0.5)
    with active.step(samples=32):  # and the meter goes on as before
        pass
    assert active.measurements.samples == [32, 32, 32]
    active.evaluate(accuracy=0.5)
    assert all(wait >= 0 for wait in active.measurements.data_wait_s)
