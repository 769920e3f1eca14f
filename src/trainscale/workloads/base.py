"""The workload contract: a small declarative spec, not a class hierarchy.

A workload says what to train (a model builder per framework), on what (data builders, real
and synthetic of the same shapes), how to score it (loss, metric, target) and a default
recipe that reaches the target. The trainer does everything else, identically for every
workload. Only the model builders are framework-specific: the data, recipe, target and
options are the same whichever framework trains the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainscale.data.tensors import DataRequest, DataSize, Located, TensorData
from trainscale.errors import ConfigError

ModelBuilder = Callable[[Mapping[str, Any]], Any]
"""Builds a model from `TensorData.meta` (num_classes, vocab_size, ...), as the object its
framework trains: a `torch.nn.Module` for PyTorch; for TensorFlow and JAX a twin of the
PyTorch model (`trainscale.models.tensorflow.KerasTwin`, `trainscale.models.jax.FlaxTwin`)
that also says how the PyTorch model's weights are copied into it. A twin's builder imports
its framework when called, never at import."""

PYTORCH = "pytorch"
"""The framework name of PyTorch model builders: every workload has one."""
TENSORFLOW = "tensorflow"
"""The framework name of a Keras twin's builder (it returns a `models.tensorflow.KerasTwin`)."""
JAX = "jax"
"""The framework name of a flax twin's builder (it returns a `models.jax.FlaxTwin`)."""
FRAMEWORK_NAMES = (PYTORCH, TENSORFLOW, JAX)
"""The keys a workload's `models` may have (`trainscale.frameworks.FRAMEWORKS`'s names)."""


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
class RoughCost:
    """What a sweep's duration estimate (`sweeps/estimate.py`) assumes of a run of the
    workload before anything runs: figures measured once, kept beside the recipe they were
    measured with. A rough guide ("minutes or hours"), not a measurement of this machine."""

    epoch_s_2_cores: float
    """Seconds of one training epoch, 1 process x 2 threads on the 2-core machine of
    docs/workloads.md ("Per-workload epoch times"; synthetic data of the real shapes)."""
    samples_to_target: int | None = None
    """Training samples the default recipe needed to first reach the workload's target on
    real data (the slowest seed's, rounded up): what a run that stops at its target trains,
    at most its planned samples. None where not measured: such a run counts its planned
    samples."""


@dataclass(frozen=True)
class Workload:
    """Everything the trainer needs to know about one reference workload."""

    name: str
    description: str
    models: Mapping[str, ModelBuilder]
    """The model builders, by framework name: {"pytorch": build, "tensorflow": ...,
    "jax": ...}; a framework the workload names no builder for is refused before launch.
    The built-in workloads name all three, their twins living beside the PyTorch models
    (`trainscale.models.tensorflow`, `trainscale.models.jax`) and starting from the PyTorch
    model's weights; everything else in the spec serves every framework."""
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
    rough_cost: RoughCost | None = None
    """What a sweep's estimate assumes of its runs; None (a user's workload): 100 s an
    epoch, its planned samples."""
    metric: str = "accuracy"
    channels_last: bool = False
    """Whether convolutions run faster in channels_last memory format (true on CPU and GPU)."""
    fixed_shapes: bool = False
    """Whether every training batch has one shape (images of one size, full batches): then
    cuDNN's autotuner (`torch.backends.cudnn.benchmark`) pays for itself on CUDA, its
    one-off search per shape being amortised over the run. Not for variable-length text,
    whose every new batch width would be searched again."""
    real_data: bool = True
    """Whether trainscale loads a real dataset for it: False for an architecture of the
    simulator and synthetic runs (`workloads/imagenet.py`), which nothing can emulate or
    check the accuracy of."""
    recurrent: bool = False
    """Whether the PyTorch model computes with cuDNN-backed recurrent layers (LSTM, GRU): on
    CUDA under bf16 they run in fp32 (models/text_rnn.py), and the run's precision reason
    says so."""
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
    unequal_steps: bool = False
    """Whether its steps do unequal work by design (texts of different lengths, batched by
    length): a short batch's step is then the median one, so the run's throughput is the
    batch over the mean timed step, and a mean far above the median is no sign of a stall
    (docs/methodology.md, "Steps of unequal work")."""

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError(f"workload {self.name!r} has no model builder")

    @property
    def frameworks(self) -> list[str]:
        """The frameworks this workload has a model builder for, sorted."""
        return sorted(self.models)

    def recurrent_in_fp32(self, framework: str, device: str, precision: str) -> bool:
        """Whether a run computes its recurrent layers in fp32 though it is a bf16 run:
        PyTorch's cuDNN RNNs on a GPU (`recurrent`); the other frameworks' models compute
        in the run's dtype."""
        return self.recurrent and framework == PYTORCH and device == "cuda" and precision == "bf16"

    def build_model(self, meta: Mapping[str, Any], framework: str = PYTORCH) -> Any:
        """The model for `framework`, built from the data's `meta`; ConfigError in one line
        when the workload has no builder for it (naming the frameworks it has), or when a
        twin's framework is not installed (naming the extra)."""
        try:
            builder = self.models[framework]
        except KeyError:
            raise ConfigError(
                f"workload {self.name!r} has no {framework} model; it has: "
                f"{', '.join(self.frameworks)}"
            ) from None
        try:
            return builder(meta)
        except ModuleNotFoundError as error:
            if framework == PYTORCH:  # a core dependency: the module is the builder's own
                raise
            # A twin's builder imports its framework when called; the extras are named
            # after the frameworks.
            raise ConfigError(
                f"the {framework} model of workload {self.name!r} needs {error.name}, which "
                f"is not installed: pip install 'trainscale[{framework}]'"
            ) from error

    def loss(self, logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0):
        """Mean cross-entropy: every reference workload is a classifier."""
        return nn.functional.cross_entropy(logits, target, label_smoothing=label_smoothing)
