"""How a worker exchanges gradients and figures with its peers: not at all (one worker), or
DistributedDataParallel over a torch process group (gloo between CPUs, NCCL between GPUs).

A communication knows nothing of pinning or data placement: that is the device's concern
(parallel/device.py); it only asks the device where tensors live and which backend moves them.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn

from trainscale.parallel.device import Device

CommHook = Callable[[Any, Any], Any]
"""A DDP gradient-communication hook, `hook(state, bucket) -> Future[Tensor]` (see
`DistributedDataParallel.register_comm_hook`)."""


def _uncompiled(model: nn.Module) -> Any:
    # torch.compile wraps the module it is given and keeps it as `_orig_mod` (here, DDP).
    return getattr(model, "_orig_mod", model)


class Communication(Protocol):
    """What the trainer asks of a worker's peers; identities when there are none."""

    def setup(self) -> None:
        """Join the peers (after the device's setup: NCCL binds to the selected GPU)."""
        ...

    def teardown(self) -> None:
        """Leave the peers; safe to call when `setup` failed or never ran."""
        ...

    def wrap(self, model: nn.Module) -> nn.Module:
        """The model as it trains: gradients averaged across workers in backward."""
        ...

    def unwrap(self, model: nn.Module) -> nn.Module:
        """The plain module inside what `wrap` (and torch.compile after it) returned."""
        ...

    def no_sync(self, model: nn.Module) -> AbstractContextManager[Any]:
        """A context in which backward accumulates gradients without communicating."""
        ...

    def hook(self, model: nn.Module, hook: CommHook, state: Any) -> bool:
        """Install `hook` (called with `state`) on the wrapped model's gradient buckets;
        False when there is no communication to hook."""
        ...

    def share_buffers(self, model: nn.Module) -> None:
        """Give every rank's `model` rank 0's buffers (running statistics)."""
        ...

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over all workers, in place (and returned)."""
        ...

    def max_float(self, value: float) -> float:
        """The largest `value` of all workers."""
        ...

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order (on all ranks)."""
        ...

    def describe(self) -> str:
        """'serial', 'ddp(gloo, 2 workers)'."""
        ...


class NoCommunication:
    """One worker: nothing is wrapped, every collective is the identity."""

    def setup(self) -> None:
        pass

    def teardown(self) -> None:
        pass

    def wrap(self, model: nn.Module) -> nn.Module:
        return model

    def unwrap(self, model: nn.Module) -> nn.Module:
        return _uncompiled(model)

    def no_sync(self, model: nn.Module) -> AbstractContextManager[Any]:
        return nullcontext()

    def hook(self, model: nn.Module, hook: CommHook, state: Any) -> bool:
        return False

    def share_buffers(self, model: nn.Module) -> None:
        pass

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def max_float(self, value: float) -> float:
        return value

    def gather_objects(self, obj: Any) -> list[Any]:
        return [obj]

    def describe(self) -> str:
        return "serial"


class DdpCommunication:
    """DistributedDataParallel over a process group of `world_size` workers, one per device."""

    def __init__(
        self,
        device: Device,
        world_size: int,
        timeout_s: float,
        bucket_cap_mb: float | None = None,
    ) -> None:
        self.device = device
        self.world_size = world_size
        self.timeout_s = timeout_s
        self.bucket_cap_mb = bucket_cap_mb

    @property
    def _on_gpu(self) -> bool:
        return self.device.torch_device.type == "cuda"

    def setup(self) -> None:
        # Collectives raise after `timeout`: a silent or dead peer ends the run instead of
        # hanging it forever.
        timeout = datetime.timedelta(seconds=self.timeout_s)
        # NCCL binds its communicator to the worker's GPU at once; gloo has no device to bind.
        bound: dict[str, Any] = {"device_id": self.device.torch_device} if self._on_gpu else {}
        dist.init_process_group(self.device.collective_backend, timeout=timeout, **bound)

    def teardown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    def wrap(self, model: nn.Module) -> nn.Module:
        # DDP broadcasts rank 0's parameters at construction, so all replicas start equal.
        # Gradients as views into the communication buckets save a copy per step.
        options: dict[str, Any] = {"gradient_as_bucket_view": True}
        if self.bucket_cap_mb is not None:
            options["bucket_cap_mb"] = self.bucket_cap_mb
        if self._on_gpu:  # a single-device CUDA module names its device; a CPU one must not
            options["device_ids"] = [self.device.torch_device.index]
        return nn.parallel.DistributedDataParallel(model, **options)

    def unwrap(self, model: nn.Module) -> nn.Module:
        # torch.compile runs after the wrap, so it is outermost; DDP keeps the module as
        # `.module`, itself compiled if it was compiled before the wrap.
        return _uncompiled(_uncompiled(model).module)

    def no_sync(self, model: nn.Module) -> AbstractContextManager[Any]:
        return _uncompiled(model).no_sync()

    def hook(self, model: nn.Module, hook: CommHook, state: Any) -> bool:
        _uncompiled(model).register_comm_hook(state=state, hook=hook)
        return True

    def share_buffers(self, model: nn.Module) -> None:
        # DDP broadcasts rank 0's buffers as each training forward starts, but every rank's
        # running statistics then move with its own batch: after a step the replicas'
        # batch norms differ. Not coalesced: evaluation, the caller, is off the clock.
        for buffer in model.buffers():
            dist.broadcast(buffer, src=0)

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        if self._on_gpu and tensor.device.type == "cpu":
            # NCCL reduces GPU tensors only; another framework's evaluator counts on the
            # host (JAX on a GPU): reduce a device copy, then write it back in place.
            on_device = tensor.to(self.device.torch_device)
            dist.all_reduce(on_device, op=dist.ReduceOp.SUM)
            tensor.copy_(on_device)
            return tensor
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def max_float(self, value: float) -> float:
        # On the device: NCCL reduces GPU tensors only.
        t = torch.tensor([value], dtype=torch.float64, device=self.device.torch_device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def gather_objects(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def describe(self) -> str:
        return f"ddp({self.device.collective_backend}, {self.world_size} workers)"
