"""A workload's pre-training phase in TensorFlow (mnist-dbn's greedy CD), timed on the
training clock exactly as PyTorch's (`trainscale.train.setup.run_pretraining`): the slowest
rank's seconds, and the figures the phase reports."""

from __future__ import annotations

import time
from typing import Any

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.errors import ConfigError
from trainscale.frameworks.tensorflow.distribute import TfDistribution, sum_over_workers
from trainscale.parallel.strategy import Strategy
from trainscale.train.progress import ProgressSink
from trainscale.train.setup import Pretraining
from trainscale.workloads.base import Workload


def run_pretraining(
    model: Any,
    workload: Workload,
    data: TensorData,
    strategy: Strategy,
    config: RunConfig,
    distribution: TfDistribution,
    progress: ProgressSink,
) -> Pretraining | None:
    """The workload's pre-training of the Keras `model`, timed; None when it has none.

    `config`'s batch size is what this process feeds a step (the global batch with
    --single-process, whose one process then needs no sum over workers).
    """
    if workload.pretrain is None:
        return None
    if workload.name != "mnist-dbn":
        raise ConfigError(f"workload {workload.name!r} has no TensorFlow pre-training")
    t0 = time.perf_counter()
    figures = _pretrain_dbn(model, data, strategy, config, distribution, progress)
    return Pretraining(strategy.max_float(time.perf_counter() - t0), figures)


def _pretrain_dbn(
    model: Any,
    data: TensorData,
    strategy: Strategy,
    config: RunConfig,
    distribution: TfDistribution,
    progress: ProgressSink,
) -> dict[str, Any]:
    """mnist-dbn's greedy CD with the run's options, as PyTorch's `mnist_dbn.pretrain` runs
    it: this worker's shard in the trainer's order, the statistics summed over the workers
    (through tf.distribute) and divided by the global batch."""
    import numpy as np

    from trainscale.frameworks.tensorflow.dbn_pretrain import pretrain_stack
    from trainscale.workloads.mnist_dbn import cd_settings

    settings = cd_settings(config)
    batch_size = config.optimisation.batch_size
    global_batch = batch_size * strategy.env.world_size
    summed = sum_over_workers(distribution)

    def average(flat: np.ndarray) -> np.ndarray:
        return np.asarray(summed(flat)) / global_batch

    def order(num_rows: int, epoch: int, seed: int) -> np.ndarray:
        return strategy.shard_indices(num_rows, epoch, seed).numpy()

    return pretrain_stack(
        model,
        data.train_x.numpy(),
        settings,
        batch_size,
        average=average,
        order=order,
        global_batch_size=global_batch,
        worker_seed=strategy.env.rank,
        max_float=strategy.max_float,
        progress=progress,
    )
