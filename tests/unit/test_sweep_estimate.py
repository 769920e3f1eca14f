"""A sweep's rough duration: a run that stops at its target counts the samples its workload
was measured to need to reach it, not its whole recipe."""

from __future__ import annotations

import dataclasses

import pytest

from trainscale.sweeps import estimate, recipes
from trainscale.sweeps.estimate import RUN_OVERHEAD_S, UNMEASURED_EPOCH_S, estimate_sweep
from trainscale.sweeps.recipes import recipe_spec
from trainscale.sweeps.spec import parse_spec
from trainscale.workloads import get_workload

from tests.helpers.tiny import tiny_workload


def epoch_s(name: str) -> float:
    return get_workload(name).rough_cost.epoch_s_2_cores  # type: ignore[union-attr]


def samples_to_target(name: str) -> int:
    to_target = get_workload(name).rough_cost.samples_to_target  # type: ignore[union-attr]
    assert to_target is not None
    return to_target


@pytest.fixture
def platforms(monkeypatch):
    """The platform study on a 2-core machine without a GPU."""
    monkeypatch.setattr(recipes, "_gpu_count", lambda: 0)
    return parse_spec(recipe_spec("platforms", quick=False, core_ids=[0, 1]), "platforms")


def _seconds_to_target(name: str, samples_to_target: int) -> float:
    workload = get_workload(name)
    num_train = workload.synthetic_size.num_train  # type: ignore[union-attr]
    planned = workload.recipe.epochs * num_train
    return RUN_OVERHEAD_S + min(planned, samples_to_target) * epoch_s(name) / num_train


def test_the_platform_study_is_estimated_from_the_samples_to_each_target(platforms):
    whole = estimate_sweep(platforms)
    assert whole.runs == 24
    # 3 CPU settings x 2 rounds of each workload, each trained to its target only.
    expected = sum(
        6 * _seconds_to_target(name, samples_to_target(name)) for name in recipes.PLATFORM_WORKLOADS
    )
    assert whole.seconds == pytest.approx(expected)
    assert whole.seconds < 5 * 3600  # the whole recipes were about 13 h
    assert whole.text().startswith("24 runs, about ")


def test_the_workloads_rough_cost_drives_the_estimate(platforms, monkeypatch):
    before = estimate_sweep(platforms).seconds
    bigru = get_workload("imdb-bigru")
    slower = dataclasses.replace(
        bigru, rough_cost=dataclasses.replace(bigru.rough_cost, samples_to_target=2 * 25_000)
    )
    monkeypatch.setattr(
        estimate,
        "get_workload",
        lambda name: slower if name == "imdb-bigru" else get_workload(name),
    )
    after = estimate_sweep(platforms).seconds
    # Six runs of the BiGRU, each now two epochs of its 1,158 s instead of one.
    assert after - before == pytest.approx(6 * epoch_s("imdb-bigru"))


def test_a_workload_without_a_rough_cost_is_given_a_round_epoch(monkeypatch):
    unmeasured = dataclasses.replace(tiny_workload(), rough_cost=None)
    monkeypatch.setattr(estimate, "get_workload", lambda name: unmeasured)
    spec = parse_spec({"base": {"workload": "mnist-cnn", "epochs": 2}}, "t")
    assert estimate_sweep(spec).seconds == pytest.approx(RUN_OVERHEAD_S + 2 * UNMEASURED_EPOCH_S)


@pytest.mark.parametrize(
    "changes",
    [
        {"stop_at_target": False},  # trains the whole recipe
        {"target_accuracy": 0.95},  # another target than the table's
        {"workload": "tweets-text"},  # no measured samples to target
    ],
)
def test_runs_the_table_does_not_describe_count_their_planned_samples(changes):
    base = {"workload": "imdb-bilstm", "stop_at_target": True, **changes}
    spec = parse_spec({"base": base}, default_name="t")
    name = base["workload"]
    workload = get_workload(name)
    num_train = workload.synthetic_size.num_train  # type: ignore[union-attr]
    planned = workload.recipe.epochs * num_train
    expected = RUN_OVERHEAD_S + planned * epoch_s(name) / num_train
    assert estimate_sweep(spec).seconds == pytest.approx(expected)


def test_a_recipe_shorter_than_the_samples_to_target_counts_its_own():
    spec = parse_spec(
        {"base": {"workload": "imdb-bigru", "stop_at_target": True, "epochs": 0.25}}, "t"
    )
    expected = RUN_OVERHEAD_S + 0.25 * epoch_s("imdb-bigru")
    assert estimate_sweep(spec).seconds == pytest.approx(expected)


@pytest.mark.parametrize("warmup", [0, 5])
def test_a_run_of_steps_counts_those_steps_its_warm_up_among_them(warmup):
    base = {"workload": "mnist-cnn", "steps": 40, "global_batch_size": 64}
    spec = parse_spec({"base": {**base, "warmup_steps": warmup}}, "t")
    workload = get_workload("mnist-cnn")
    num_train = workload.synthetic_size.num_train  # type: ignore[union-attr]
    expected = RUN_OVERHEAD_S + 40 * 64 * epoch_s("mnist-cnn") / num_train
    assert estimate_sweep(spec).seconds == pytest.approx(expected)
