from __future__ import annotations

import math

import pytest

from trainscale.config.options import RunConfig, RunOptions
from trainscale.errors import ConfigError
from trainscale.run.resolve import resolve
from trainscale.train.lr import scaled_lr
from trainscale.workloads import get_workload


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"workers": 0}, "--workers"),
        ({"batch_size": -4}, "--batch-size"),
        ({"lr": float("nan")}, "--lr"),
        ({"epochs": 0}, "--epochs"),
        ({"precision": "fp8"}, "--precision"),
        ({"lr_scaling": "cubic"}, "--lr-scaling"),
        ({"target_accuracy": 99.0}, "--target-accuracy"),
        ({"batch_size": 8, "global_batch_size": 16}, "not both"),
        ({"workers": 3, "global_batch_size": 16, "allow_oversubscribe": True}, "divisible"),
        ({"threads_per_worker": "many"}, "--threads-per-worker"),
    ],
)
def test_invalid_options_name_the_option(changes, fragment):
    # Options check themselves when they are made: no run can hold an invalid one.
    with pytest.raises(ConfigError, match=fragment):
        RunOptions.of(workload="mnist-cnn", **changes)


def test_unknown_workload_lists_valid_ones():
    with pytest.raises(ConfigError, match="valid workloads: .*mnist-cnn"):
        resolve(RunOptions.of(workload="resnet-9000"))


def test_more_workers_than_cores_is_refused_without_flag():
    with pytest.raises(ConfigError, match="oversubscribes"):
        resolve(
            RunOptions.of(workload="mnist-cnn", workers=4, threads_per_worker=1),
            available_cores=[0, 1],
        )
    config = resolve(
        RunOptions.of(
            workload="mnist-cnn", workers=4, threads_per_worker=1, allow_oversubscribe=True
        ),
        available_cores=[0, 1],
    )
    assert config.parallel.oversubscribed


def test_defaults_plan_threads_and_batch():
    config = resolve(RunOptions.of(workload="mnist-cnn", workers=2), available_cores=[0, 1, 2, 3])
    assert config.parallel.threads_per_worker == 2
    assert config.parallel.core_sets == [[0, 1], [2, 3]]
    recipe_batch = get_workload("mnist-cnn").recipe.batch_size
    assert (
        config.optimisation.batch_size == recipe_batch
        and config.optimisation.global_batch_size == 2 * recipe_batch
    )
    assert not config.parallel.oversubscribed


def test_global_batch_is_split_and_lr_scaled():
    config = resolve(
        RunOptions.of(
            workload="mnist-cnn", workers=2, global_batch_size=512, lr_scaling="linear", lr=0.01
        ),
        available_cores=[0, 1],
    )
    assert config.optimisation.batch_size == 256
    reference = get_workload("mnist-cnn").recipe.batch_size
    assert config.optimisation.reference_batch_size == reference
    assert config.optimisation.lr == pytest.approx(0.01 * 512 / reference)
    assert config.optimisation.warmup_fraction >= 0.1  # scaled lr gets a warm-up


def test_torch_default_threads_is_marked_oversubscribed_and_unset():
    config = resolve(
        RunOptions.of(
            workload="mnist-cnn", workers=2, threads_per_worker="torch-default", affinity="none"
        ),
        available_cores=[0, 1],
    )
    assert config.parallel.threads_per_worker is None and config.parallel.core_sets is None
    assert config.parallel.oversubscribed


def test_scaled_lr_rules():
    assert scaled_lr(0.1, 256, 128, "none") == 0.1
    assert scaled_lr(0.1, 256, 128, "linear") == pytest.approx(0.2)
    assert scaled_lr(0.1, 512, 128, "sqrt") == pytest.approx(0.2)
    assert math.isclose(scaled_lr(0.1, 64, 128, "linear"), 0.05)


def test_config_roundtrips_through_its_flat_form():
    config = resolve(RunOptions.of(workload="mnist-cnn"), available_cores=[0])
    assert RunConfig.from_flat(config.flat()) == config


def test_an_unknown_key_in_a_flat_config_is_refused():
    flat = resolve(RunOptions.of(workload="mnist-cnn"), available_cores=[0]).flat()
    with pytest.raises(ConfigError, match="unknown RunConfig field 'wrokers'"):
        RunConfig.from_flat({**flat, "wrokers": 2})
