"""Worker entry for the DDP-equals-serial test (a module, so spawned workers can import it)."""

from __future__ import annotations


def train_and_return_state(config_dict: dict) -> dict:
    from trainscale.config.options import RunConfig
    from trainscale.parallel.distenv import DistEnv
    from trainscale.parallel.strategy import make_strategy
    from trainscale.train.trainer import train

    from tests.helpers.tiny import tiny_data, tiny_workload

    config = RunConfig.from_flat(config_dict)
    strategy = make_strategy(config, DistEnv.from_environ())
    strategy.setup()
    try:
        outcome = train(config, tiny_workload(), tiny_data(), strategy)
        state = {k: v.clone() for k, v in outcome.model.state_dict().items()}
        return {"state": state, "step_times": outcome.step_times_s, "summary": outcome.summary}
    finally:
        strategy.teardown()
