"""Where a worker computes: the host cores and threads every worker has, and the device its
tensors live on (the CPU, or its node's GPU of its local rank).

A device knows nothing of the worker's peers: joining them is the communication's concern
(parallel/communication.py), and a strategy puts the two together (parallel/strategy.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import torch

from trainscale.config.options import ParallelConfig
from trainscale.data.tensors import TensorData
from trainscale.parallel.affinity import pin_current_process


@dataclass(frozen=True)
class HostThreads:
    """The host side of a worker: the cores it is pinned to and its intra-op threads.

    A GPU worker needs them as much as a CPU one: its host threads slice the batches and run
    the Python loop that keeps the GPU fed.
    """

    cores: tuple[int, ...] | None = None
    """Cores to pin to; None = not pinned."""
    threads: int | None = None
    """Intra-op threads; None = torch's own default (left as it is)."""

    @classmethod
    def for_worker(cls, parallel: ParallelConfig, local_rank: int) -> HostThreads:
        """The cores and threads the run's plan gives the worker of `local_rank`."""
        cores: Sequence[int] | None = None
        threads = parallel.threads_per_worker
        if parallel.single_process:
            # One process holds every replica: it gets all the replicas' cores and threads.
            if parallel.core_sets is not None:
                cores = sorted({core for s in parallel.core_sets for core in s})
            threads = None if threads is None else threads * parallel.workers
        elif parallel.core_sets is not None:
            cores = parallel.core_sets[local_rank % len(parallel.core_sets)]
        return cls(None if cores is None else tuple(cores), threads)

    def apply(self) -> None:
        """Pin to the cores and fix the thread count: before torch starts its thread pool,
        since threads inherit the affinity mask they are created with."""
        if self.cores is not None:
            pin_current_process(self.cores)
        if self.threads is not None:
            torch.set_num_threads(self.threads)


class Device(Protocol):
    """The device one worker trains on."""

    torch_device: torch.device
    """Where the model and the data live (known before `setup`, which selects it)."""
    collective_backend: str
    """The process-group backend that moves this device's tensors between workers."""

    def setup(self) -> None:
        """Take the device: pin and thread the host, select the GPU."""
        ...

    def place_data(self, data: TensorData) -> TensorData:
        """The dataset on this device (once, so no step copies a batch over)."""
        ...

    def describe(self) -> str:
        """'cpu', 'cuda(NVIDIA H100 80GB HBM3)'."""
        ...


class CpuDevice:
    """The CPU: the data stays where it was loaded, collectives go over gloo."""

    collective_backend = "gloo"

    def __init__(self, host: HostThreads) -> None:
        self.host = host
        self.torch_device = torch.device("cpu")

    def setup(self) -> None:
        self.host.apply()

    def place_data(self, data: TensorData) -> TensorData:
        return data

    def describe(self) -> str:
        return "cpu"


class CudaDevice:
    """The GPU of the worker's local rank, the dataset resident on it, collectives over NCCL."""

    collective_backend = "nccl"

    def __init__(self, host: HostThreads, index: int) -> None:
        self.host = host
        self.torch_device = torch.device("cuda", index)

    def setup(self) -> None:
        self.host.apply()  # pinning and host threads still matter: they feed the GPU
        torch.cuda.set_device(self.torch_device)

    def place_data(self, data: TensorData) -> TensorData:
        return replace(
            data,
            train_x=data.train_x.to(self.torch_device),
            train_y=data.train_y.to(self.torch_device),
            test_x=data.test_x.to(self.torch_device),
            test_y=data.test_y.to(self.torch_device),
        )

    def describe(self) -> str:
        return f"cuda({torch.cuda.get_device_name(self.torch_device)})"
