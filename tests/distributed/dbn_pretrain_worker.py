"""Worker entry for the CD pre-training equivalence test (importable by spawned workers)."""

from __future__ import annotations


def pretrain_and_return_state(config_dict: dict, settings_dict: dict, batch_size: int) -> dict:
    """Pre-train a small DBN on this worker's shards; return its state and figures."""
    import torch

    from trainscale.config.options import RunConfig
    from trainscale.parallel.distenv import DistEnv
    from trainscale.parallel.strategy import make_strategy
    from trainscale.workloads.dbn_pretrain import CdSettings, pretrain_stack

    config = RunConfig.from_flat(config_dict)
    strategy = make_strategy(config, DistEnv.from_environ())
    strategy.setup()
    try:
        model = small_dbn()
        figures = pretrain_stack(
            model, dataset(), strategy, CdSettings(**settings_dict), batch_size
        )
        state = {k: v.clone() for k, v in model.state_dict().items()}
        return {"state": state, "figures": figures, "threads": torch.get_num_threads()}
    finally:
        strategy.teardown()


def small_dbn():
    """Same initial weights in every process (and in the serial reference)."""
    import torch

    from trainscale.models.dbn import DeepBeliefNet

    torch.manual_seed(0)
    return DeepBeliefNet(16, (12, 8), 3)


def dataset():
    """96 grey-level 16-pixel vectors in [0, 1], the same in every process."""
    import torch

    return torch.rand(96, 16, generator=torch.Generator().manual_seed(1))
