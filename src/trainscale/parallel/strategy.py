"""Execution strategies: a worker's device and its communication with its peers, put together.

The trainer loop only talks to a `Strategy`; it never checks which device or communication
it has. That is what lets one loop serve one CPU core, many CPU processes and many GPUs
alike. The two halves vary independently (any device with or without peers), so they are
composed rather than inherited:

  device (parallel/device.py)                 cpu: pinning + intra-op threads
                                              cuda: the local GPU, data on it, pinned host
  communication (parallel/communication.py)   none: identity collectives
                                              ddp: process group (gloo or NCCL), DDP wrap
  sharding (parallel/sharding.py)             the rank's samples (DistributedSampler order)
"""

from __future__ import annotations

import os
import socket
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.parallel.allocator import allocator_fact
from trainscale.parallel.communication import (
    CommHook,
    Communication,
    DdpCommunication,
    NoCommunication,
)
from trainscale.parallel.device import CpuDevice, CudaDevice, Device, HostThreads
from trainscale.parallel.distenv import DistEnv, node_address
from trainscale.parallel.sharding import Sharding


class Strategy:
    """One worker's device, communication and shard, behind the interface the trainer uses."""

    def __init__(self, env: DistEnv, device: Device, communication: Communication) -> None:
        self.env = env
        self.worker_device = device
        self.communication = communication
        self.sharding = Sharding(env.rank, env.world_size)

    @property
    def device(self) -> torch.device:
        """The torch device the model and the data live on."""
        return self.worker_device.torch_device

    # -- lifecycle -------------------------------------------------------------------------
    def setup(self) -> None:
        """Take the device (pin, threads, GPU), then join the peers."""
        # The device first: threads are fixed before any collective starts torch's pool, and
        # NCCL binds to the GPU the device selected.
        self.worker_device.setup()
        self.communication.setup()

    def teardown(self) -> None:
        """Release what setup acquired (safe after a failed or skipped setup)."""
        self.communication.teardown()

    # -- model and data --------------------------------------------------------------------
    def place_data(self, data: TensorData) -> TensorData:
        """The dataset on this worker's device (once, so no step copies a batch over)."""
        return self.worker_device.place_data(data)

    def wrap(self, model: nn.Module) -> nn.Module:
        """The model as it trains (DDP-wrapped when there are peers)."""
        return self.communication.wrap(model)

    def unwrap(self, model: nn.Module) -> nn.Module:
        """The plain module inside `wrap`'s (and torch.compile's) wrappers."""
        return self.communication.unwrap(model)

    def no_sync(self, model: nn.Module) -> AbstractContextManager[Any]:
        """A context in which backward accumulates gradients without communicating."""
        return self.communication.no_sync(model)

    def hook_communication(self, model: nn.Module, hook: CommHook, state: Any) -> bool:
        """Install the caller's gradient-communication `hook` (with `state`) on the wrapped
        model; False if there is no communication to hook."""
        return self.communication.hook(model, hook, state)

    def shard_indices(self, num_samples: int, epoch: int, seed: int) -> torch.Tensor:
        """This worker's sample order for `epoch` (see `Sharding.shard_indices`)."""
        return self.sharding.shard_indices(num_samples, epoch, seed)

    def eval_shard(self, num_samples: int) -> slice:
        """The slice of the test set this rank evaluates (ranks split evaluation work)."""
        return self.sharding.eval_shard(num_samples)

    # -- collectives (identity when serial) --------------------------------------------------
    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over all workers, in place (and returned)."""
        return self.communication.sum_tensor(tensor)

    def max_float(self, value: float) -> float:
        """The largest `value` of all workers."""
        return self.communication.max_float(value)

    def share_buffers(self, model: nn.Module) -> None:
        """Give every rank's `model` (unwrapped) rank 0's buffers, such as batch norm's
        running statistics: then every rank holds the model rank 0 stores."""
        self.communication.share_buffers(model)

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order (on all ranks)."""
        return self.communication.gather_objects(obj)

    def describe(self) -> str:
        """'cpu, serial', 'cuda(NVIDIA H100 80GB HBM3), ddp(nccl, 8 workers)'."""
        return f"{self.worker_device.describe()}, {self.communication.describe()}"


def make_strategy(config: RunConfig, env: DistEnv) -> Strategy:
    """The strategy for this run: its device (CPU or the local GPU) and, with more than one
    worker, DDP among them. Nothing is acquired until `setup`."""
    host = HostThreads.for_worker(config.parallel, env.local_rank)
    device: Device
    if config.parallel.device == "cuda":
        device = CudaDevice(host, env.local_rank)
    else:
        device = CpuDevice(host)
    communication: Communication = NoCommunication()
    if env.world_size > 1:
        communication = DdpCommunication(
            device, env.world_size, config.parallel.timeout_s, config.parallel.bucket_cap_mb
        )
    return Strategy(env, device, communication)


def worker_facts() -> dict[str, Any]:
    """What this worker actually runs with (not what was asked): cores, threads, pid, and
    where it ran (host name, and the address the other nodes reach it at)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "pid": os.getpid(),
        "cores": cores,
        "torch_threads": torch.get_num_threads(),
        "allocator": allocator_fact(),
        "hostname": socket.gethostname(),
        "addr": node_address(),
    }
