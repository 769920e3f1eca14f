"""A non-finite training loss fails the run as diverged, found where the loop synchronises
anyway (evaluation points, epoch ends), naming the first step whose loss was not finite."""

from __future__ import annotations

import pytest
import torch

from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.train.divergence import StepLosses, TrainingDiverged
from trainscale.train.loop import StepRules
from trainscale.train.plan import StepPlan

from tests.helpers.tiny import tiny_config
from tests.unit.test_loop import RecordingStep, loop_of


def _losses(first_step: int = 0) -> StepLosses:
    strategy = make_strategy(tiny_config(), DistEnv())
    return StepLosses(strategy, total_steps=10, first_step=first_step, capacity=6)


def test_finite_losses_pass_and_the_first_bad_step_is_named():
    losses = _losses()
    for _ in range(3):
        losses.add(torch.tensor(1.5))
    losses.check()
    assert losses.mean() == 1.5
    losses.add(torch.tensor(float("inf")))
    losses.add(torch.tensor(float("nan")))
    losses.add(torch.tensor(0.5))
    with pytest.raises(TrainingDiverged, match=r"^diverged: non-finite loss at step 4 of 10"):
        losses.check()


def test_a_later_epoch_names_the_runs_step_and_the_mean_is_its_own():
    losses = _losses(first_step=6)  # the second epoch of 6-step epochs
    losses.add(torch.tensor(2.0))
    losses.add(4.0)  # a number, as other frameworks' steps return
    assert losses.mean() == 3.0
    losses.check()
    losses.add(torch.tensor(float("nan")))
    with pytest.raises(TrainingDiverged, match=r"non-finite loss at step 9 of 10"):
        losses.check()


def test_observing_keeps_the_flag_on_the_device_without_reading_it(monkeypatch):
    losses = _losses()

    def no_reads(self):  # reading a tensor on the host is what would sync a GPU per step
        raise AssertionError("a loss was read on the host")

    monkeypatch.setattr(torch.Tensor, "item", no_reads)
    monkeypatch.setattr(torch.Tensor, "__float__", no_reads)
    monkeypatch.setattr(torch.Tensor, "__bool__", no_reads)
    for step in range(5):
        losses.add(torch.tensor(float("nan") if step == 2 else 1.0))


class NanAt(RecordingStep):
    """Loss NaN from step index `bad` on."""

    def __init__(self, bad: int) -> None:
        super().__init__(StepRules(samples_per_step=8, draws_batches=False))
        self.bad = bad

    def step(self, given):
        super().step(given)
        return torch.tensor(float("nan") if given.index >= self.bad else 1.0)


def test_the_loop_stops_at_the_epoch_end_after_a_nan_loss():
    stepper = NanAt(bad=6)
    with pytest.raises(TrainingDiverged, match=r"non-finite loss at step 7 of 20"):
        loop_of(stepper, StepPlan(steps_per_epoch=10, total_steps=20), evaluate=False)
    assert len(stepper.given) == 10  # the first epoch's end: no second epoch on garbage
    assert not stepper.finished
