"""The order a run takes its training samples in, epoch by epoch: one permutation per
(seed, epoch), the same in every framework and on every worker (each then takes its shard,
parallel/sharding.py)."""

from __future__ import annotations

import torch

ORDERS_PER_SEED = 1_000_003
"""How many epochs' orders one seed owns: epoch e of seed s shuffles with generator seed
s * ORDERS_PER_SEED + e (`order_seed`). With seed + e, seed 1's first epoch was seed 0's
second, so runs of different seeds shared their data orders, shifted by one epoch."""


def order_seed(seed: int, epoch: int) -> int:
    """The generator seed of `epoch`'s shuffle in a run of `seed`: distinct for every pair
    with 0 <= epoch < ORDERS_PER_SEED (seed 0 draws epoch e from e)."""
    return seed * ORDERS_PER_SEED + epoch


def epoch_permutation(num_samples: int, epoch: int, seed: int) -> torch.Tensor:
    """All `num_samples` indices in `epoch`'s order for a run of `seed` (a CPU int64 tensor)."""
    generator = torch.Generator().manual_seed(order_seed(seed, epoch))
    return torch.randperm(num_samples, generator=generator)
