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
    from trainscale.frameworks.tensorflow.dbn_pretrain import pretrain

    t0 = time.perf_counter()
    figures = pretrain(
        model, data, strategy, config, progress, average=sum_over_workers(distribution)
    )
    return Pretraining(strategy.max_float(time.perf_counter() - t0), figures)
