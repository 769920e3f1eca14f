"""Which samples each worker trains and evaluates on: a function of its rank and the world
size alone, so a real rank and an emulated one (emulation/streams.py) draw the same shard."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainscale.data.orders import epoch_permutation


@dataclass(frozen=True)
class Sharding:
    """Rank `rank`'s share of the data among `world_size` workers."""

    rank: int = 0
    world_size: int = 1

    def shard_indices(self, num_samples: int, epoch: int, seed: int) -> torch.Tensor:
        """This worker's sample order for `epoch` (DistributedSampler semantics).

        Every rank draws the same permutation from (seed, epoch), pads it to a multiple of
        the world size by repeating its head, and takes every world_size-th index from its
        rank on: disjoint shards of equal length, a fresh shuffle each epoch.
        """
        order = epoch_permutation(num_samples, epoch, seed)
        world = self.world_size
        padded = -(-num_samples // world) * world
        if padded > num_samples:
            order = torch.cat([order, order[: padded - num_samples]])
        return order[self.rank : padded : world]

    def eval_shard(self, num_samples: int) -> slice:
        """The slice of the test set this rank evaluates (ranks split evaluation work)."""
        return slice(self.rank, num_samples, self.world_size)
