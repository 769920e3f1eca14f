"""Each emulated worker's batches, in the order a real rank of N would train on them.

A stream asks the trainer's `WorkerBatches` for the batches of rank r of N (the same
`Strategy` sharding, batch ordering and augmentation seeds as a real rank), so an emulated
worker sees exactly the batches of the rank it stands for; it only keeps its own place, as
emulated workers may walk their shards at different paces (asynchronous SGD).
"""

from __future__ import annotations

import torch

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.parallel.sharding import Sharding
from trainscale.train.batches import WorkerBatches
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
        self.batches_per_epoch = batches_per_epoch
        self.position = 0
        """Batches taken so far (over all epochs)."""
        self._batches = WorkerBatches(config, workload, data, train_x, Sharding(rank, world))
        self._epoch = -1
        self._order: torch.Tensor | None = None

    @property
    def epoch(self) -> int:
        """The epoch of this worker's next batch (0-based)."""
        return self.position // self.batches_per_epoch

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """This worker's next (x, y) batch of `config.optimisation.batch_size` samples."""
        epoch, index = divmod(self.position, self.batches_per_epoch)
        if epoch != self._epoch:
            self._order = self._batches.epoch_order(epoch)
            self._epoch = epoch
        assert self._order is not None
        self.position += 1
        return self._batches.batch(self._order, index)


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
