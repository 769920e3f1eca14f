"""Worker entry for the TensorFlow equivalence tests (a module, so spawned workers can
import it): trains mnist-cnn with its dropout off and returns the final weights."""

from __future__ import annotations

from typing import Any


def dropout_free_recorded(build: Any, initial: list) -> Any:
    """A Keras twin builder whose models have every dropout rate at 0 (the runs compared
    differ in how samples are spread over replicas, and dropout masks would differ with it),
    and whose weight copy also keeps the weights it loaded, in `initial`."""

    def build_without_dropout(meta: Any) -> Any:
        import dataclasses

        import keras

        twin = build(meta)
        for layer in twin.model._flatten_layers():
            if isinstance(layer, keras.layers.Dropout):
                layer.rate = 0.0

        def copy_and_record(torch_model: Any, model: Any) -> None:
            twin.copy_torch_weights(torch_model, model)
            initial.extend(variable.numpy() for variable in model.weights)

        return dataclasses.replace(twin, copy_torch_weights=copy_and_record)

    return build_without_dropout


def train_and_return_weights(config_dict: dict) -> dict:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import dataclasses

    from trainscale.config.options import RunConfig
    from trainscale.frameworks.tensorflow.trainer import train
    from trainscale.parallel.distenv import DistEnv
    from trainscale.parallel.strategy import make_strategy
    from trainscale.workloads import TENSORFLOW, get_workload

    from tests.helpers.tf_tiny import learnable_digits

    initial: list = []
    workload = get_workload("mnist-cnn")
    build = dropout_free_recorded(workload.models[TENSORFLOW], initial)
    workload = dataclasses.replace(workload, models={**workload.models, TENSORFLOW: build})
    config = RunConfig.from_flat(config_dict)
    strategy = make_strategy(config, DistEnv.from_environ())
    strategy.setup()
    try:
        outcome = train(config, workload, learnable_digits(96, 30), strategy)
        return {
            "weights": [variable.numpy() for variable in outcome.model.weights],
            "initial": initial,
            "step_times": outcome.step_times_s,
            "summary": outcome.summary,
            "workers": outcome.workers,
        }
    finally:
        strategy.teardown()


def sum_rank_vectors(config_dict: dict) -> Any:
    """Each worker's [rank + 1, 10 (rank + 1)] summed over the workers by `sum_over_workers`
    (what mnist-dbn's CD statistics go through)."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    from trainscale.config.options import RunConfig
    from trainscale.frameworks.tensorflow.distribute import setup_distribution, sum_over_workers
    from trainscale.parallel.distenv import DistEnv
    from trainscale.parallel.strategy import make_strategy

    config = RunConfig.from_flat(config_dict)
    strategy = make_strategy(config, DistEnv.from_environ())
    strategy.setup()
    try:
        summed = sum_over_workers(setup_distribution(config, strategy))
        rank = strategy.env.rank
        value = np.array([rank + 1, 10 * (rank + 1)], dtype=np.float32)
        return [np.asarray(summed(value)).tolist() for _ in range(2)]  # traced once, run twice
    finally:
        strategy.teardown()
