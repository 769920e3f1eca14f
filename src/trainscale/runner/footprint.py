"""How much memory a run will hold, estimated in the parent before any worker starts.

Every worker holds the whole dataset as tensors (train and test: each epoch draws its shard
from a permutation of all of it, and evaluation reads the test set), twice for a moment
while loading; its model with gradients and optimizer state; and a Python process with
torch. The estimate is a floor, not a forecast: activations and the allocator's slack come
on top. A run whose floor exceeds the memory available cannot fit, so it is refused in one
line rather than killed by the kernel mid-run (with its run stored as failed).

The sample shapes come from a two-sample synthetic set (the workload contract makes
synthetic data the real data's shapes) and the parameter count from the model built on
torch's meta device, which allocates nothing: a model far too large to build is counted
all the same."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainscale.data.tensors import DataRequest, DataSize
from trainscale.hardware.resources import (
    BYTES_PER_PARAMETER,
    STATE_COPIES,
    WORKER_PROCESS_BYTES,
    check_memory,
    format_bytes,
)
from trainscale.models.meta_device import shapes_only
from trainscale.workloads.base import Workload

DATA_COPIES = 2
"""Copies of the dataset a worker holds at its peak: while loading, the arrays read (or the
synthetic tensors drawn) and the tensors made from them exist together for a moment."""


@dataclass(frozen=True)
class Footprint:
    """One worker's share of memory, in bytes, and what it is made of."""

    data_bytes: int
    """The dataset as tensors (train and test, inputs and labels), once."""
    num_parameters: int

    @property
    def parameter_bytes(self) -> int:
        """One copy of the weights (or of their gradients)."""
        return self.num_parameters * BYTES_PER_PARAMETER

    @property
    def model_state_bytes(self) -> int:
        return self.parameter_bytes * STATE_COPIES

    @property
    def worker_bytes(self) -> int:
        """One worker process at its peak: data, model state and the process itself."""
        return DATA_COPIES * self.data_bytes + self.model_state_bytes + WORKER_PROCESS_BYTES

    def describe(self) -> str:
        """'data 2 x 210 MiB + model state 18.3 MiB (1,199,882 parameters) + process 150 MiB'."""
        return (
            f"data {DATA_COPIES} x {format_bytes(self.data_bytes)} + model state "
            f"{format_bytes(self.model_state_bytes)} ({self.num_parameters:,} parameters) + "
            f"process {format_bytes(WORKER_PROCESS_BYTES)}"
        )


def estimate_footprint(
    workload: Workload, options: Mapping[str, str], size: DataSize, seed: int = 0
) -> Footprint:
    """The footprint of one worker training `workload` (with its `-o` options) on a dataset
    of `size` samples."""
    sample = workload.make_synthetic(
        DataRequest(options=dict(options), seed=seed, max_train=2, max_test=2)
    )
    data_bytes = _row_bytes(sample.train_x, sample.train_y) * size.num_train
    data_bytes += _row_bytes(sample.test_x, sample.test_y) * size.num_test
    try:
        with shapes_only():
            model = workload.build_model(sample.meta)
        num_parameters = sum(p.numel() for p in model.parameters())
    except Exception:
        # A user's model that cannot be built on the meta device (it reads a weight's value
        # while it is built, or is broken): the floor leaves its state out, and a broken one
        # fails in the worker, where its run is stored as failed with the reason.
        num_parameters = 0
    return Footprint(data_bytes, num_parameters)


def _row_bytes(x: Any, y: Any) -> int:
    """Bytes of one sample: its input row and its label."""
    return int(x[0].numel() * x.element_size() + y[0].numel() * y.element_size())


def check_run_memory(config: Any, footprint: Footprint, available: int | None = None) -> None:
    """ConfigError when this node's workers cannot hold what `footprint` says (one line).

    On a GPU the model state lives in device memory; the host still holds the data and the
    processes.
    """
    per_worker = footprint.worker_bytes
    if config.parallel.device == "cuda":
        per_worker -= footprint.model_state_bytes
    workers = config.parallel.workers
    what = (
        f"{workers} worker{'s' if workers != 1 else ''} x ({footprint.describe()})"
        if workers > 1
        else f"one worker ({footprint.describe()})"
    )
    check_memory(
        workers * per_worker,
        what,
        "use fewer --workers, or a smaller dataset or model (see the -o options in "
        "`trainscale workloads`)",
        available,
    )
