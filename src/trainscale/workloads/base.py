"""The workload contract: a small declarative spec, not a class hierarchy.

A workload says what to train (model builder), on what (data builders, real and synthetic
of the same shapes), how to score it (loss, metric, target) and a default recipe that
reaches the target. The trainer does everything else, identically for every workload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn


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
    """What `Workload.locate_real` found: where the real dataset is, and its size."""

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
    max_train: int | None = None
    """Keep at most this many training samples (tests use tiny sets); None = all."""
    max_test: int | None = None


@dataclass(frozen=True)
class Recipe:
    """Default hyper-parameters, for one worker at `batch_size` (the lr reference batch)."""

    optimizer: str
    """'sgd' (momentum, nesterov), 'adam' or 'adamw'."""
    lr: float
    """Peak learning rate at the reference batch size `batch_size`."""
    batch_size: int
    epochs: float
    schedule: str = "onecycle"
    """'constant', 'onecycle' (warm-up then linear/cosine decay to ~0) or 'cosine'."""
    momentum: float = 0.9
    nesterov: bool = True
    """Nesterov momentum for SGD (the CIFAR ResNet paper used plain momentum)."""
    weight_decay: float = 0.0
    label_smoothing: float = 0.0
    warmup_fraction: float = 0.0
    """Share of the steps spent warming the lr up linearly from ~0 (on top of lr scaling)."""


@dataclass(frozen=True)
class Workload:
    """Everything the trainer needs to know about one reference workload."""

    name: str
    description: str
    build_model: Callable[[Mapping[str, Any]], nn.Module]
    """Builds the model from `TensorData.meta` (num_classes, vocab_size, ...)."""
    locate_real: Callable[[DataRequest], Located]
    """Finds (or, when allowed, downloads) and checks the real dataset; returns where it is
    and how many samples it holds (read from the files it checked, so the parent can plan
    the run). Raises DataError with one line that says where it looked and how to provide
    the data."""
    load_real: Callable[[DataRequest], TensorData]
    """Loads the real dataset as in-memory tensors; raises DataError."""
    make_synthetic: Callable[[DataRequest], TensorData]
    """Random tensors of the real shapes (and the same meta), from the request's seed."""
    target_accuracy: float
    recipe: Recipe
    synthetic_size: DataSize | None = None
    """Samples in `make_synthetic`'s full set, known without building it (every registered
    workload declares it, so a synthetic run is planned as a real one is)."""
    metric: str = "accuracy"
    channels_last: bool = False
    """Whether convolutions run faster in channels_last memory format (true on CPU and GPU)."""
    options: Mapping[str, str] = field(default_factory=dict)
    """Workload options a user may set with `-o KEY=VALUE`: name -> help text (with default)."""
    check_options: Callable[[Mapping[str, str]], None] | None = None
    """Checks the option values when the run is resolved (before any worker starts); raises
    ConfigError with one line naming the bad option."""
    augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None
    """Per-batch training augmentation on whole batch tensors (on the training clock)."""
    pretrain: Callable[[nn.Module, TensorData, Any, Any, Any], dict[str, Any]] | None = None
    """Optional phase before supervised training,
    `pretrain(model, data, strategy, config, progress)`; it runs on the training clock, may
    report through the progress sink (a null sink off the main rank), and returns figures
    for the summary. With several workers it must average its own updates
    (strategy.sum_tensor)."""
    batch_order: Callable[[torch.Tensor, TensorData, int, torch.Generator], torch.Tensor] | None = (
        None
    )
    """Optional reordering of a worker's shard each epoch, `batch_order(order, data,
    batch_size, generator) -> order` (a permutation of `order`), e.g. to group texts of
    similar length into batches. The generator is seeded alike on every rank."""
    flops_batch: Callable[[TensorData], tuple[torch.Tensor, torch.Tensor]] | None = None
    """Optional (x, y) on which FLOPs per sample are counted; default: the first two training
    samples. Variable-length workloads give samples of the mean training length."""

    def loss(self, logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0):
        """Mean cross-entropy: every reference workload is a classifier."""
        return nn.functional.cross_entropy(logits, target, label_smoothing=label_smoothing)
