"""One worker's batches: each epoch's sample order and each step's batch.

The order of an epoch is the worker's shard from `Sharding.shard_indices`
(DistributedSampler semantics: one permutation per (seed, epoch), padded and dealt out rank
by rank), then the workload's optional batch ordering. A batch is a slice of that order,
gathered from the in-memory set, then the workload's optional augmentation. The seeds
depend only on the run's seed, the epoch and the rank, so any code that asks for rank r's
batches (the trainer, or an emulated worker) gets exactly the same ones.
"""

from __future__ import annotations

import torch

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.parallel.sharding import Sharding
from trainscale.workloads.base import Workload


class WorkerBatches:
    """The batches of the worker `sharding` deals to (a rank of its world)."""

    def __init__(
        self,
        config: RunConfig,
        workload: Workload,
        data: TensorData,
        train_x: torch.Tensor,
        sharding: Sharding,
    ) -> None:
        """`train_x` is the training inputs as the model takes them (e.g. channels_last)."""
        self.config = config
        self.workload = workload
        self.data = data
        self.train_x = train_x
        self.sharding = sharding
        # On the inputs' device, so augmentation draws there: no host-to-device copy a step.
        self._augment = torch.Generator(device=train_x.device).manual_seed(
            config.optimisation.seed * 1000 + sharding.rank
        )

    @property
    def augmentation(self) -> torch.Generator:
        """The generator the workload's augmentation draws from (on the inputs' device)."""
        return self._augment

    def epoch_order(self, epoch: int) -> torch.Tensor:
        """This worker's sample order for `epoch`, on the device the data lives on."""
        seed = self.config.optimisation.seed
        order = self.sharding.shard_indices(self.data.num_train, epoch, seed)
        if self.workload.batch_order is not None:
            # Seeded alike on every rank, so ranks order their batches alike (for length
            # bucketing: similar lengths at the same step, no rank waits on a long batch).
            generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
            order = self.workload.batch_order(
                order, self.data, self.config.optimisation.batch_size, generator
            )
        return order.to(self.train_x.device)

    def batch(self, order: torch.Tensor, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch `index` of an epoch's `order`: (x, y), x augmented when the workload says.

        Gathered with advanced indexing, which keeps a channels_last layout (index_select
        would return contiguous NCHW batches).
        """
        size = self.config.optimisation.batch_size
        rows = order[index * size : (index + 1) * size]
        x = self.train_x[rows]
        y = self.data.train_y[rows]
        if self.workload.augment is not None:
            x = self.workload.augment(x, self._augment)
        return x, y
