"""The training loop drives any step function: cadence, clocks, rows, and the rules a step
function declares."""

from __future__ import annotations

import time

import pytest
import torch

from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.train.batches import WorkerBatches
from trainscale.train.loop import StepInput, StepRules, run_loop
from trainscale.train.plan import StepPlan
from trainscale.train.progress import NullProgress

from tests.helpers.tiny import TinyNet, tiny_config, tiny_data, tiny_workload


class RecordingStep:
    """A step function that trains nothing and records what the loop handed it."""

    def __init__(self, rules: StepRules) -> None:
        self.rules = rules
        self.model = TinyNet()
        self.given: list[StepInput] = []
        self.batches: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.evaluations = 0
        self.finished = False

    def step(self, given: StepInput) -> torch.Tensor:
        self.given.append(given)
        if given.draw is not None:
            self.batches.append(given.draw())
        return torch.tensor(float(given.index))

    def eval_model(self) -> torch.nn.Module:
        self.evaluations += 1
        return self.model

    def finish(self) -> torch.nn.Module:
        self.finished = True
        return self.model


def loop_of(stepper, plan, batches=None, **changes):
    config = tiny_config(**changes)
    strategy = make_strategy(config, DistEnv())
    return run_loop(
        stepper,
        plan,
        config,
        tiny_data(),
        strategy,
        NullProgress(),
        "test",
        batches=batches,
        clock_start_s=0.5,
    )


def test_evaluation_every_period_and_at_every_epoch_end_once():
    stepper = RecordingStep(StepRules(samples_per_step=16, draws_batches=False))
    outcome = loop_of(stepper, StepPlan(steps_per_epoch=5, total_steps=12), eval_every=2)
    assert [g.index for g in stepper.given] == list(range(12))
    assert all(g.draw is None for g in stepper.given)
    # Every 2 steps, and at the ends of the epochs (5, 10, 12), never twice at one step.
    assert [point.step for point in outcome.curve] == [2, 4, 5, 6, 8, 10, 12]
    assert stepper.evaluations == len(outcome.curve) and stepper.finished
    assert [e.global_steps for e in outcome.epochs] == [5, 10, 12]
    assert [e.full for e in outcome.epochs] == [True, True, False]
    # An epoch's loss is the mean of its steps' losses (here the step indices).
    assert [e.train_loss for e in outcome.epochs] == [2.0, 7.0, 10.5]
    assert outcome.final.accuracy == outcome.curve[-1].accuracy == outcome.epochs[-1].test_accuracy


def test_the_clock_starts_at_pretraining_and_holds_every_step_but_no_evaluation():
    stepper = RecordingStep(StepRules(samples_per_step=16, draws_batches=False))
    outcome = loop_of(stepper, StepPlan(steps_per_epoch=6, total_steps=6), eval_every=1)
    assert len(outcome.step_times_s) == 6
    assert outcome.train_clock_s == pytest.approx(0.5 + sum(outcome.step_times_s))
    assert outcome.curve[0].clock_s == pytest.approx(0.5 + outcome.step_times_s[0])
    assert outcome.eval_time_s > 0
    clocks = [point.clock_s for point in outcome.curve]
    assert clocks == sorted(clocks)


def test_a_step_function_that_keeps_no_step_times_gets_none_back():
    stepper = RecordingStep(
        StepRules(samples_per_step=16, draws_batches=False, keeps_step_times=False)
    )
    outcome = loop_of(stepper, StepPlan(steps_per_epoch=6, total_steps=6))
    assert outcome.step_times_s == []
    assert outcome.train_clock_s > 0.5  # the steps are still on the training clock


def test_the_loop_draws_each_ranks_shard_in_order_for_a_step_function_that_asks():
    config = tiny_config(global_batch_size=16)
    data = tiny_data()
    strategy = make_strategy(config, DistEnv())
    batches = WorkerBatches(config, tiny_workload(), data, data.train_x, strategy.sharding)
    stepper = RecordingStep(StepRules(samples_per_step=16))
    loop_of(stepper, StepPlan(steps_per_epoch=6, total_steps=8), batches=batches)
    for epoch, index, (x, y) in [(0, i, b) for i, b in enumerate(stepper.batches[:6])] + [
        (1, i, b) for i, b in enumerate(stepper.batches[6:])
    ]:
        rows = strategy.shard_indices(data.num_train, epoch, config.optimisation.seed)
        rows = rows[index * 16 : (index + 1) * 16]
        assert torch.equal(x, data.train_x[rows]) and torch.equal(y, data.train_y[rows])


def test_a_step_function_that_takes_its_batches_from_the_loop_needs_them():
    stepper = RecordingStep(StepRules(samples_per_step=16))
    with pytest.raises(ValueError, match="batches"):
        loop_of(stepper, StepPlan(steps_per_epoch=6, total_steps=6))


class SlowEvaluationStep(RecordingStep):
    """Its evaluations take a noticeable time, which the training clock must not hold."""

    def eval_model(self) -> torch.nn.Module:
        time.sleep(0.1)
        return super().eval_model()


def test_one_mark_per_step_boundary_chains_the_steps():
    # A step starts where the previous one ended, so host work between steps is on the clock
    # and the step times cover the whole span between evaluations.
    stepper = RecordingStep(StepRules(samples_per_step=16, draws_batches=False))
    outcome = loop_of(stepper, StepPlan(steps_per_epoch=6, total_steps=6), eval_every=100)
    starts = [g.start for g in stepper.given]
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert outcome.step_times_s[:-1] == pytest.approx(gaps)


def test_the_chain_restarts_after_an_evaluation():
    stepper = SlowEvaluationStep(StepRules(samples_per_step=16, draws_batches=False))
    outcome = loop_of(stepper, StepPlan(steps_per_epoch=6, total_steps=6), eval_every=2)
    # Three evaluations of 100 ms each ran between the steps: none is on any step.
    assert max(outcome.step_times_s) < 0.1
    assert outcome.eval_time_s >= 0.3
