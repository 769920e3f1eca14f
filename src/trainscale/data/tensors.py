"""What a dataset is to the rest of trainscale: in-memory tensors, the request that loads
them, and the facts known about them before they are loaded.

Every loader in data/ returns a `TensorData`; workloads receive a `DataRequest`; the parent
plans a run from a `DataSize` (the sample counts found when the files were located), so it
never loads the data itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class TensorData:
    """A dataset held as in-memory tensors; batches are sliced from it, never per sample."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    kind: str
    """'real' or 'synthetic'. No accuracy claim is ever made from synthetic data."""
    source: str
    """Where the data came from: a directory, or a description of the synthetic generator."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Facts the model builder needs, e.g. {'num_classes': 3, 'vocab_size': 20000}."""

    @property
    def num_train(self) -> int:
        return int(self.train_x.shape[0])

    @property
    def num_test(self) -> int:
        return int(self.test_x.shape[0])


@dataclass(frozen=True)
class DataSize:
    """How many samples a dataset holds: what the parent needs to plan a run before any
    worker loads the data (a worker's shard, the memory the tensors take)."""

    num_train: int
    num_test: int


@dataclass(frozen=True)
class Located:
    """What a workload's `locate_real` found: where the real dataset is, and its size."""

    path: Path
    """The directory (or file) the workers read from."""
    size: DataSize


@dataclass(frozen=True)
class DataRequest:
    """What a workload's data functions are asked for."""

    data_dir: Path | None = None
    """A user-given directory (or file, for loaders that read one file): when given, the only
    place looked in (trainscale.data.search)."""
    download: bool = True
    """Whether a missing dataset may be downloaded into the cache (checksummed)."""
    options: Mapping[str, str] = field(default_factory=dict)
    """Workload options (`-o KEY=VALUE`), already checked against `Workload.options`."""
    seed: int = 0
    """Seed for synthetic data."""
    prepare: bool = True
    """Whether `locate_real` may also prepare what the workers will read (encode a text set
    into the cache). False when only asked whether the data is here (`recipes`, a sweep's
    dry run): a loader may then answer from the files alone."""
    max_train: int | None = None
    """Keep at most this many training samples (tests use tiny sets); None = all."""
    max_test: int | None = None
