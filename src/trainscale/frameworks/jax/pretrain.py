"""A workload's pre-training phase in JAX (its flax twin's `pretrain`, such as mnist-dbn's
CD pre-training), on the training clock exactly as the PyTorch trainer times its own
(train/setup.py `run_pretraining`): from its first to its last update, the slowest
process's time. The phase is the workload's; what it needs of JAX's processes is here.

With several processes each computes its statistics (CD's) over its shard of the global
batch and one JAX all-reduce (a psum over the run's mesh, gloo between processes) sums them;
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
from trainscale.models.twin_pretraining import TwinPretraining
from trainscale.parallel.strategy import Strategy
from trainscale.train.progress import ProgressSink
from trainscale.train.setup import Pretraining
from trainscale.workloads.base import Workload


def cd_averager(distribution: Distribution, global_batch: int) -> Callable[[jax.Array], Any]:
    """`average(flat)` for a twin's pre-training: this process's sums summed over the
    processes (one psum over the mesh) and divided by the global batch."""
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
    twin: Any,
    data: TensorData,
    variables: dict[str, Any],
    strategy: Strategy,
    distribution: Distribution,
    local_batch: int,
    progress: ProgressSink,
) -> tuple[dict[str, Any], Pretraining | None]:
    """The workload's pre-training of `variables` by its flax `twin` (returned changed) and
    its time and figures; (variables, None) when the workload has no such phase."""
    if workload.pretrain is None:
        return variables, None
    if twin.pretrain is None:
        raise ConfigError(
            f"workload {workload.name!r} pre-trains in PyTorch but its flax twin has no "
            "pre-training (FlaxTwin.pretrain)"
        )

    def order(num_rows: int, epoch: int, seed: int) -> np.ndarray:
        return strategy.shard_indices(num_rows, epoch, seed).numpy()

    global_batch = local_batch * distribution.processes
    context = TwinPretraining(
        train_x=data.train_x.numpy(),
        config=config,
        local_batch=local_batch,
        global_batch=global_batch,
        average=cd_averager(distribution, global_batch),
        order=order,
        rank=strategy.env.rank,
        slowest=strategy.max_float,
        progress=progress,
    )
    t0 = time.perf_counter()
    variables, figures = twin.pretrain(variables, context)
    jax.block_until_ready(variables)
    return variables, Pretraining(strategy.max_float(time.perf_counter() - t0), figures)
