"""`--stop-at-target`: the loop ends at the first evaluation that reaches the target, a run
that never reaches it trains its whole plan, and the option is refused where there is no
accuracy to reach."""

from __future__ import annotations

import pytest
import torch

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.runner.resolve import resolve
from trainscale.train.loop import LoopOutcome, StepInput, StepRules, run_loop
from trainscale.train.plan import StepPlan
from trainscale.train.progress import NullProgress
from trainscale.train.trainer import train as train_run

from tests.helpers.tiny import TinyNet, tiny_config, tiny_data, tiny_workload

PLAN = StepPlan(steps_per_epoch=5, total_steps=12)
"""Evaluations (every 2 steps and at epoch ends) fall at steps 2, 4, 5, 6, 8, 10, 12."""


class CountingStep:
    """Trains nothing; counts the steps the loop asked for."""

    rules = StepRules(samples_per_step=16, draws_batches=False)

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.finished = False

    def step(self, given: StepInput) -> torch.Tensor:
        self.steps.append(given.index)
        return torch.tensor(float(given.index))

    def eval_model(self) -> torch.nn.Module:
        return TinyNet()

    def finish(self) -> torch.nn.Module:
        self.finished = True
        return TinyNet()


def scripted(accuracies: list[float]):
    """An evaluator that reads the given accuracies in turn (the last one from then on)."""
    calls = iter(accuracies)
    last = [accuracies[-1]]

    def evaluate(model: object) -> tuple[float, float, float]:
        last[0] = next(calls, last[0])
        return last[0], 1.0 - last[0], last[0]

    return evaluate


def train(
    accuracies: list[float], stop: bool, **changes: object
) -> tuple[CountingStep, LoopOutcome]:
    config = tiny_config(eval_every=2, target_accuracy=0.5, stop_at_target=stop, **changes)
    stepper = CountingStep()
    outcome = run_loop(
        stepper,
        PLAN,
        config,
        tiny_data(),
        make_strategy(config, DistEnv()),
        NullProgress(),
        "test",
        evaluator=scripted(accuracies),
    )
    return stepper, outcome


def test_the_loop_stops_at_the_first_evaluation_that_reaches_the_target():
    # Below at steps 2 and 4, then exactly the target (reached: >=) at the epoch's end.
    stepper, outcome = train([0.2, 0.4, 0.5, 0.9], stop=True)
    assert stepper.steps == [0, 1, 2, 3, 4] and stepper.finished
    assert outcome.stopped_at_target
    assert [point.step for point in outcome.curve] == [2, 4, 5]
    assert outcome.final is not None and outcome.final.accuracy == 0.5
    assert len(outcome.step_times_s) == 5
    assert [(e.global_steps, e.full) for e in outcome.epochs] == [(5, True)]


def test_a_stop_mid_epoch_leaves_a_partial_epoch_row_of_the_steps_it_took():
    stepper, outcome = train([0.2, 0.7], stop=True)
    assert stepper.steps == [0, 1, 2, 3]
    assert outcome.stopped_at_target
    assert outcome.final is not None and outcome.final.accuracy == 0.7
    (epoch,) = outcome.epochs
    assert (epoch.global_steps, epoch.full, epoch.test_accuracy) == (4, False, 0.7)
    assert epoch.train_loss == 1.5  # the mean of the 4 steps' losses (their indices 0-3)
    assert epoch.epoch_time_s == pytest.approx(sum(outcome.step_times_s), abs=0.01)


def test_without_the_flag_the_run_trains_its_whole_plan_past_the_target():
    stepper, outcome = train([0.2, 0.7], stop=False)
    assert stepper.steps == list(range(12)) and not outcome.stopped_at_target
    assert [point.step for point in outcome.curve] == [2, 4, 5, 6, 8, 10, 12]


def test_a_run_that_never_reaches_the_target_trains_its_whole_plan():
    stepper, outcome = train([0.2, 0.3, 0.49], stop=True)
    assert stepper.steps == list(range(12)) and not outcome.stopped_at_target
    rows = [(e.global_steps, e.full) for e in outcome.epochs]
    assert rows == [(5, True), (10, True), (12, False)]


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"evaluate": False}, "it cannot go with --no-eval"),
        ({"data": "synthetic"}, "synthetic data has none"),
    ],
)
def test_no_accuracy_to_reach_is_refused(changes, fragment):
    with pytest.raises(ConfigError, match=fragment) as refused:
        RunOptions.of("mnist-cnn", stop_at_target=True, **changes)
    assert str(refused.value).startswith("--stop-at-target needs an accuracy to reach")
    assert "\n" not in str(refused.value)
    RunOptions.of("mnist-cnn", **changes)  # without the flag, the same run is fine


def test_the_flag_is_stored_with_the_run_and_shapes_its_settings():
    options = RunOptions.of("mnist-cnn", stop_at_target=True)
    config = resolve(options, available_cores=[0])
    assert config.flat()["stop_at_target"] is True
    plain = resolve(RunOptions.of("mnist-cnn"), available_cores=[0])
    assert plain.flat()["stop_at_target"] is False
    # A run that stops at its target is not a repeat of one that trains its whole recipe.
    assert config.settings_hash() != plain.settings_hash()


@pytest.mark.parametrize("stop", [True, False])
def test_the_summary_says_the_run_stopped_at_its_target_before_its_planned_steps(stop):
    # A target every evaluation reaches: the run stops at the first one, after 2 steps.
    config = tiny_config(steps=10, eval_every=2, target_accuracy=0.01, stop_at_target=stop)
    metrics = train_run(
        config, tiny_workload(), tiny_data(), make_strategy(config, DistEnv())
    ).metrics
    assert metrics.planned_steps == 10 and metrics.stopped_at_target is stop
    assert metrics.num_steps == (2 if stop else 10)
    assert metrics.time_to_target_s == metrics.accuracy_curve[0][0]
    assert metrics.test_accuracy == metrics.accuracy_curve[-1][1]
