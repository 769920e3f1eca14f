"""A non-finite training loss fails the run as diverged, found where the loop synchronises
anyway (evaluation points, epoch ends), naming the first step whose loss was not finite."""

from __future__ import annotations

import pytest
import torch

from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.train.divergence import DivergenceWatch, TrainingDiverged
from trainscale.train.loop import StepRules
from trainscale.train.plan import StepPlan

from tests.helpers.tiny import tiny_config
from tests.unit.test_loop import RecordingStep, loop_of


def _watch() -> DivergenceWatch:
    return DivergenceWatch(make_strategy(tiny_config(), DistEnv()), total_steps=10)


def test_finite_losses_pass_and_the_first_bad_step_is_named():
    watch = _watch()
    for step in range(3):
        watch.observe(torch.tensor(1.5), step)
    watch.check()
    watch.observe(torch.tensor(float("inf")), 3)
    watch.observe(torch.tensor(float("nan")), 4)
    watch.observe(torch.tensor(0.5), 5)
    with pytest.raises(TrainingDiverged, match=r"^diverged: non-finite loss at step 4 of 10"):
        watch.check()


def test_observing_keeps_the_flag_on_the_device_without_reading_it(monkeypatch):
    watch = _watch()

    def no_reads(self):  # reading a tensor on the host is what would sync a GPU per step
        raise AssertionError("a loss was read on the host")

    monkeypatch.setattr(torch.Tensor, "item", no_reads)
    monkeypatch.setattr(torch.Tensor, "__float__", no_reads)
    monkeypatch.setattr(torch.Tensor, "__bool__", no_reads)
    for step in range(5):
        watch.observe(torch.tensor(float("nan") if step == 2 else 1.0), step)


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
