"""Worker entry for the JAX equivalence tests (a module, so spawned workers can import it)."""

from __future__ import annotations

from typing import Any


def tiny_dbn_data(options: dict[str, str], num_train: int = 96, num_test: int = 30) -> Any:
    """mnist-dbn's synthetic data, few samples (the same in every process), marked real so
    that the runs evaluate (tests only: never a real claim)."""
    import dataclasses

    from trainscale.data.tensors import DataRequest
    from trainscale.workloads import get_workload

    request = DataRequest(options=options, seed=0, max_train=num_train, max_test=num_test)
    data = get_workload("mnist-dbn").make_synthetic(request)
    return dataclasses.replace(data, kind="real")


def train_and_return_variables(config_dict: dict[str, Any]) -> dict[str, Any]:
    """Train the JAX trainer on tiny mnist-dbn data in this process; return its trained
    variables (numpy), step times, summary and worker facts."""
    import jax
    import numpy as np

    from trainscale.config.options import RunConfig
    from trainscale.frameworks.jax.trainer import train
    from trainscale.parallel.distenv import DistEnv
    from trainscale.parallel.strategy import make_strategy
    from trainscale.workloads import get_workload

    config = RunConfig.from_flat(config_dict)
    strategy = make_strategy(config, DistEnv.from_environ())
    strategy.setup()
    try:
        data = tiny_dbn_data(dict(config.data.workload_options))
        outcome = train(config, get_workload("mnist-dbn"), data, strategy)
        return {
            "variables": jax.tree_util.tree_map(np.asarray, outcome.model.variables),
            "step_times": outcome.step_times_s,
            "summary": outcome.summary,
            "workers": outcome.workers,
        }
    finally:
        strategy.teardown()
