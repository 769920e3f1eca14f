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
        return {
            "state": state,
            "step_times": outcome.step_times_s,
            "summary": outcome.summary,
            "epochs": outcome.epochs,
        }
    finally:
        strategy.teardown()


def train_norm_drop(config_dict: dict) -> dict:
    """Train NormDropNet (batch norm, dropout) as one of two workers: the dropout masks of
    the last training step, the final buffers, the stored test loss, and the test loss of
    this rank's final model scored alone on the whole test set."""
    import dataclasses

    import torch

    from trainscale.config.options import RunConfig
    from trainscale.parallel.distenv import DistEnv
    from trainscale.parallel.strategy import make_strategy
    from trainscale.train.evaluate import evaluate
    from trainscale.train.trainer import train
    from trainscale.workloads.base import PYTORCH

    from tests.helpers.tiny import NormDropNet, tiny_data, tiny_workload

    masks: list[torch.Tensor] = []

    def build(meta: object) -> NormDropNet:
        model = NormDropNet()

        def keep_mask(module: object, inputs: tuple, output: torch.Tensor) -> None:
            if module.training:  # the last is the last step's (the passes before the
                kept = output != 0  # first step, such as the FLOP count, come first)
                live = inputs[0] != 0
                masks[:] = [torch.where(live, kept, torch.zeros_like(kept)), live]

        model.drop.register_forward_hook(keep_mask)
        return model

    config = RunConfig.from_flat(config_dict)
    workload = dataclasses.replace(tiny_workload(), models={PYTORCH: build})
    strategy = make_strategy(config, DistEnv.from_environ())
    strategy.setup()
    try:
        outcome = train(config, workload, tiny_data(), strategy)
        buffers = {name: b.clone() for name, b in outcome.model.named_buffers()}
        alone = make_strategy(config.with_(workers=1), DistEnv())
        _, own_loss, _ = evaluate(outcome.model, tiny_data(), alone, "fp32", False)
        return {
            "kept": masks[0],
            "live": masks[1],
            "buffers": buffers,
            "test_loss": outcome.summary["test_loss"],
            "own_test_loss": own_loss,
        }
    finally:
        strategy.teardown()
