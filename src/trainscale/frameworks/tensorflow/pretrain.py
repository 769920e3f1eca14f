"""A workload's pre-training phase in TensorFlow (its Keras twin's `pretrain`, such as
mnist-dbn's greedy CD), timed on the training clock exactly as PyTorch's
(`trainscale.train.setup.run_pretraining`): the slowest rank's seconds, and the figures the
phase reports. The phase is the workload's; what it needs of tf.distribute is here."""

from __future__ import annotations

import time
from typing import Any

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.errors import ConfigError
from trainscale.frameworks.tensorflow.distribute import TfDistribution, sum_over_workers
from trainscale.models.twin_pretraining import TwinPretraining
from trainscale.parallel.strategy import Strategy
from trainscale.train.progress import ProgressSink
from trainscale.train.setup import Pretraining
from trainscale.workloads.base import Workload


def run_pretraining(
    twin: Any,
    workload: Workload,
    data: TensorData,
    strategy: Strategy,
    config: RunConfig,
    distribution: TfDistribution,
    progress: ProgressSink,
) -> Pretraining | None:
    """The workload's pre-training of the Keras `twin`'s model, timed; None when it has none.

    `config`'s batch size is what this process feeds a step (the global batch with
    --single-process, whose one process then needs no sum over workers).
    """
    if workload.pretrain is None:
        return None
    if twin.pretrain is None:
        raise ConfigError(
            f"workload {workload.name!r} pre-trains in PyTorch but its Keras twin has no "
            "pre-training (KerasTwin.pretrain)"
        )
    import numpy as np

    local_batch = config.optimisation.batch_size
    global_batch = local_batch * strategy.env.world_size
    summed = sum_over_workers(distribution)

    def average(flat: np.ndarray) -> np.ndarray:
        return np.asarray(summed(flat)) / global_batch

    def order(num_rows: int, epoch: int, seed: int) -> np.ndarray:
        return strategy.shard_indices(num_rows, epoch, seed).numpy()

    context = TwinPretraining(
        train_x=data.train_x.numpy(),
        config=config,
        local_batch=local_batch,
        global_batch=global_batch,
        average=average,
        order=order,
        rank=strategy.env.rank,
        slowest=strategy.max_float,
        progress=progress,
    )
    t0 = time.perf_counter()
    figures = twin.pretrain(twin.model, context)
    return Pretraining(strategy.max_float(time.perf_counter() - t0), figures)
