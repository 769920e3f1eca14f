"""A workload's pre-training phase in JAX (mnist-dbn's CD pre-training), on the training
clock exactly as the PyTorch trainer times its own (train/setup.py `run_pretraining`): from
its first to its last update, the slowest process's time.

With several processes each computes the CD statistics of its shard of the global batch
and one JAX all-reduce (a psum over the run's mesh, gloo between processes) sums them;
within one process (serial, or --single-process: the process holds the whole global batch)
the sum is the process's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.errors import ConfigError
from trainscale.frameworks.jax.distribute import AXIS, Distribution
from trainscale.parallel.strategy import Strategy
from trainscale.train.progress import ProgressSink
from trainscale.train.setup import Pretraining
from trainscale.workloads.base import Workload
from trainscale.workloads.mnist_dbn import cd_settings

PRETRAINED = ("mnist-dbn",)
"""The workloads whose pre-training phase JAX has."""


def cd_averager(distribution: Distribution, global_batch: int) -> Callable[[jax.Array], Any]:
    """`average(flat)` for dbn_pretrain: this process's CD sums summed over the processes
    (one psum over the mesh) and divided by the global batch."""
    if distribution.processes == 1:
        return lambda flat: flat / global_batch
    mesh = distribution.mesh
    total = jax.jit(
        jax.shard_map(
            lambda rows: lax.psum(rows, AXIS),
            mesh=mesh,
            in_specs=PartitionSpec(AXIS),
            out_specs=PartitionSpec(),
        )
    )
    local_device = jax.local_devices()[0]

    def average(flat: jax.Array) -> jax.Array:
        row = jax.device_put(flat[None], local_device)
        rows = jax.make_array_from_single_device_arrays(
            (distribution.processes, flat.shape[0]), distribution.split(), [row]
        )
        return total(rows).addressable_data(0)[0] / global_batch

    return average


def run_pretraining(
    config: RunConfig,
    workload: Workload,
    data: TensorData,
    variables: dict[str, Any],
    strategy: Strategy,
    distribution: Distribution,
    local_batch: int,
    progress: ProgressSink,
) -> tuple[dict[str, Any], Pretraining | None]:
    """The workload's pre-training of `variables` (returned changed) and its time and
    figures; (variables, None) when the workload has no such phase."""
    if workload.pretrain is None:
        return variables, None
    if workload.name not in PRETRAINED:
        raise ConfigError(f"workload {workload.name} has no JAX pre-training phase")
    from trainscale.frameworks.jax.dbn_pretrain import pretrain_stack, shuffle_seed

    settings = cd_settings(config)
    num_train = data.train_x.shape[0]

    def batches(layer: int, epoch: int) -> np.ndarray:
        order = strategy.shard_indices(num_train, epoch, shuffle_seed(settings, layer))
        steps = order.shape[0] // local_batch
        return order[: steps * local_batch].view(steps, local_batch).numpy()

    global_batch = local_batch * distribution.processes
    t0 = time.perf_counter()
    variables, figures = pretrain_stack(
        variables,
        data.train_x.numpy(),
        settings,
        batches,
        cd_averager(distribution, global_batch),
        global_batch,
        rank=strategy.env.rank,
        slowest=strategy.max_float,
        progress=progress,
    )
    jax.block_until_ready(variables)
    return variables, Pretraining(strategy.max_float(time.perf_counter() - t0), figures)
