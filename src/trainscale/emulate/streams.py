"""Each emulated worker's batches, in the order a real rank of N would train on them.

A real rank's order comes from `Sharding.shard_indices` (DistributedSampler semantics: one
permutation per (seed, epoch), padded and dealt out rank by rank), then the workload's
optional batch ordering and augmentation, seeded as the trainer seeds them. A stream asks
the same `Sharding` code for the same shard, so an emulated worker sees exactly the batches
of the rank it stands for.
"""

from __future__ import annotations

import torch

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.parallel.sharding import Sharding
from trainscale.workloads.base import Workload


class WorkerStream:
    """The batches of rank `rank` of `world` ranks, epoch after epoch."""

    def __init__(
        self,
        rank: int,
        world: int,
        config: RunConfig,
        workload: Workload,
        data: TensorData,
        train_x: torch.Tensor,
        batches_per_epoch: int,
    ) -> None:
        """`train_x` is the training inputs as the model takes them (e.g. channels_last);
        `batches_per_epoch` is the trainer's steps per epoch at `world` ranks."""
        self.rank = rank
        self.config = config
        self.workload = workload
        self.data = data
        self.train_x = train_x
        self.batches_per_epoch = batches_per_epoch
        self.position = 0
        """Batches taken so far (over all epochs)."""
        self._sharding = Sharding(rank, world)
        # Seeded as the trainer seeds each rank's augmentation generator.
        self._augment = torch.Generator().manual_seed(config.optimisation.seed * 1000 + rank)
        self._epoch = -1
        self._order: torch.Tensor | None = None

    @property
    def epoch(self) -> int:
        """The epoch of this worker's next batch (0-based)."""
        return self.position // self.batches_per_epoch

    def _epoch_order(self, epoch: int) -> torch.Tensor:
        config = self.config
        order = self._sharding.shard_indices(self.data.num_train, epoch, config.optimisation.seed)
        if self.workload.batch_order is not None:
            # The trainer seeds this alike on every rank (same seed, fresh generator).
            generator = torch.Generator().manual_seed(config.optimisation.seed * 1_000_003 + epoch)
            order = self.workload.batch_order(
                order, self.data, config.optimisation.batch_size, generator
            )
        return order

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """This worker's next (x, y) batch of `config.optimisation.batch_size` samples."""
        epoch, index = divmod(self.position, self.batches_per_epoch)
        if epoch != self._epoch:
            self._order = self._epoch_order(epoch)
            self._epoch = epoch
        size = self.config.optimisation.batch_size
        rows = self._order[index * size : (index + 1) * size]
        x = self.train_x[rows]
        y = self.data.train_y[rows]
        if self.workload.augment is not None:
            x = self.workload.augment(x, self._augment)
        self.position += 1
        return x, y


def make_streams(
    world: int,
    config: RunConfig,
    workload: Workload,
    data: TensorData,
    train_x: torch.Tensor,
    batches_per_epoch: int,
) -> list[WorkerStream]:
    """One stream per emulated worker, rank 0 first."""
    return [
        WorkerStream(rank, world, config, workload, data, train_x, batches_per_epoch)
        for rank in range(world)
    ]
