"""Execution strategies: how one worker pins itself, picks its device, joins its peers and
wraps the model.

The trainer loop only talks to a `Strategy`; it never checks which one it has. That is
what lets one loop serve one CPU core, many CPU processes and many GPUs alike.
"""

from __future__ import annotations

import datetime
import os
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.parallel.distenv import DistEnv
from trainscale.workloads.base import TensorData


class Strategy:
    """Serial execution on the CPU: one process, T intra-op threads, optionally pinned."""

    def __init__(self, config: RunConfig, env: DistEnv):
        self.config = config
        self.env = env
        self.device = torch.device("cpu")

    # -- lifecycle -------------------------------------------------------------------------
    def setup(self) -> None:
        """Pin to cores and fix the thread count before torch starts its thread pool."""
        from trainscale.parallel.affinity import pin_current_process

        if self.config.parallel.core_sets is not None:
            cores = self.config.parallel.core_sets[
                self.env.local_rank % len(self.config.parallel.core_sets)
            ]
            pin_current_process(cores)
        if self.config.parallel.threads_per_worker is not None:
            torch.set_num_threads(self.config.parallel.threads_per_worker)

    def teardown(self) -> None:
        """Release what setup acquired."""

    # -- model and data --------------------------------------------------------------------
    def place_data(self, data: TensorData) -> TensorData:
        """The dataset on this worker's device (once, so no step copies a batch over)."""
        if self.device.type == "cpu":
            return data
        return replace(
            data,
            train_x=data.train_x.to(self.device),
            train_y=data.train_y.to(self.device),
            test_x=data.test_x.to(self.device),
            test_y=data.test_y.to(self.device),
        )

    def wrap(self, model: nn.Module) -> nn.Module:
        return model

    def unwrap(self, model: nn.Module) -> nn.Module:
        # torch.compile wraps the module it is given; DDP keeps it as `.module`.
        model = getattr(model, "_orig_mod", model)
        if isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        return getattr(model, "_orig_mod", model)

    def no_sync(self, model: nn.Module):
        """A context in which backward accumulates gradients without communicating."""
        return nullcontext()

    def hook_communication(self, model: nn.Module, breakdown: Any) -> bool:
        """Install a gradient-communication hook that marks bucket readiness; False if
        there is no communication to mark."""
        return False

    def shard_indices(self, num_samples: int, epoch: int, seed: int) -> torch.Tensor:
        """This worker's sample order for `epoch` (DistributedSampler semantics).

        Every rank draws the same permutation from (seed, epoch), pads it to a multiple of
        the world size by repeating its head, and takes every world_size-th index from its
        rank on: disjoint shards of equal length, a fresh shuffle each epoch.
        """
        generator = torch.Generator().manual_seed(seed + epoch)
        order = torch.randperm(num_samples, generator=generator)
        world = self.env.world_size
        padded = -(-num_samples // world) * world
        if padded > num_samples:
            order = torch.cat([order, order[: padded - num_samples]])
        return order[self.env.rank : padded : world]

    def eval_shard(self, num_samples: int) -> slice:
        """The slice of the test set this rank evaluates (ranks split evaluation work)."""
        world = self.env.world_size
        return slice(self.env.rank, num_samples, world)

    # -- collectives (identity when serial) --------------------------------------------------
    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def max_float(self, value: float) -> float:
        return value

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order (on all ranks)."""
        return [obj]

    def describe(self) -> str:
        return "serial"


class CpuDataParallel(Strategy):
    """N processes, DistributedDataParallel over gloo, each pinned to its own cores."""

    def setup(self) -> None:
        super().setup()
        timeout = datetime.timedelta(seconds=self.config.parallel.timeout_s)
        # gloo's collectives raise after `timeout`: a silent or dead peer ends the run instead
        # of hanging it forever.
        dist.init_process_group("gloo", timeout=timeout)

    def teardown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    def wrap(self, model: nn.Module) -> nn.Module:
        # DDP broadcasts rank 0's parameters at construction, so all replicas start equal.
        # Gradients as views into the communication buckets save a copy per step.
        options: dict[str, Any] = {"gradient_as_bucket_view": True}
        if self.config.parallel.bucket_cap_mb is not None:
            options["bucket_cap_mb"] = self.config.parallel.bucket_cap_mb
        if self.device.type == "cuda":
            options["device_ids"] = [self.device.index]
        return nn.parallel.DistributedDataParallel(model, **options)

    def no_sync(self, model: nn.Module):
        return getattr(model, "_orig_mod", model).no_sync()

    def hook_communication(self, model: nn.Module, breakdown: Any) -> bool:
        from trainscale.train.breakdown import timed_allreduce_hook

        ddp = getattr(model, "_orig_mod", model)
        ddp.register_comm_hook(state=breakdown, hook=timed_allreduce_hook)
        return True

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def max_float(self, value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def gather_objects(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.env.world_size
        dist.all_gather_object(out, obj)
        return out

    def describe(self) -> str:
        return f"cpu-ddp(gloo, {self.env.world_size} workers)"


class CudaStrategy(Strategy):
    """One GPU: the worker's CUDA device (its local rank), data resident on it."""

    def setup(self) -> None:
        super().setup()  # pinning and host threads still matter: they feed the GPU
        self.device = torch.device("cuda", self.env.local_rank)
        torch.cuda.set_device(self.device)

    def describe(self) -> str:
        return f"cuda({torch.cuda.get_device_name(self.device)})"


class CudaDataParallel(CpuDataParallel):
    """One process per GPU, DistributedDataParallel over NCCL."""

    def setup(self) -> None:
        Strategy.setup(self)
        self.device = torch.device("cuda", self.env.local_rank)
        torch.cuda.set_device(self.device)
        timeout = datetime.timedelta(seconds=self.config.parallel.timeout_s)
        dist.init_process_group("nccl", timeout=timeout, device_id=self.device)

    def describe(self) -> str:
        return f"cuda-ddp(nccl, {self.env.world_size} GPUs)"


def make_strategy(config: RunConfig, env: DistEnv) -> Strategy:
    """The strategy for this run: serial or DDP, on the CPU or on GPUs."""
    if config.parallel.device == "cuda":
        return CudaDataParallel(config, env) if env.world_size > 1 else CudaStrategy(config, env)
    if env.world_size > 1:
        return CpuDataParallel(config, env)
    return Strategy(config, env)


def worker_facts() -> dict[str, Any]:
    """What this worker actually runs with (not what was asked): cores, threads, pid, and
    where it ran (host name, and the address the other nodes reach it at)."""
    import socket

    from trainscale.parallel.distenv import node_address

    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "pid": os.getpid(),
        "cores": cores,
        "torch_threads": torch.get_num_threads(),
        "hostname": socket.gethostname(),
        "addr": node_address(),
    }
