"""A workload from in-memory arrays: the short way to measure one's own model.

`array_workload` turns a model builder and (x, y) arrays (numpy or torch) into a complete
`Workload` spec: the real data are those arrays, the synthetic data random tensors of the
same shapes and dtypes, and `meta` tells the model builder the number of classes and the
input shape. Whoever needs more (a dataset on disk found by a search path, downloads,
options) writes the spec's functions directly (docs/custom-workloads.md).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainscale.data.tensors import DataRequest, DataSize, Located, TensorData
from trainscale.errors import DataError
from trainscale.workloads.base import PYTORCH, ModelBuilder, Recipe, Workload

ArrayLike = Any
"""A numpy array or a torch tensor (anything `np.asarray` reads)."""


def array_workload(
    name: str,
    model: ModelBuilder,
    train: tuple[ArrayLike, ArrayLike],
    test: tuple[ArrayLike, ArrayLike],
    *,
    recipe: Recipe,
    target_accuracy: float,
    description: str = "",
    num_classes: int | None = None,
    channels_last: bool = False,
    twins: Mapping[str, ModelBuilder] | None = None,
) -> Workload:
    """A classifier workload on `train` = (x, y) and `test` = (x, y).

    Inputs are float (trained as float32) or integer (token ids, kept int64); labels are
    integer class indices 0..num_classes-1 (default: the largest label + 1). `model(meta)`
    builds a `torch.nn.Module` from `meta` = {'num_classes', 'input_shape', 'num_features',
    and 'vocab_size' for integer inputs}. `twins` names the model's builders in other
    frameworks, by framework ({"jax": build} returning a `trainscale.models.jax.FlaxTwin`,
    {"tensorflow": build} a `trainscale.models.tensorflow.KerasTwin`; docs/custom-workloads.md).
    Raises DataError (one line) for arrays that do not fit together.
    """
    source = _caller_file()
    train_x, train_y = _tensors(name, "train", *train)
    test_x, test_y = _tensors(name, "test", *test)
    if train_x.shape[1:] != test_x.shape[1:] or train_x.dtype != test_x.dtype:
        raise DataError(
            f"workload {name}: train inputs {tuple(train_x.shape[1:])} {train_x.dtype} and "
            f"test inputs {tuple(test_x.shape[1:])} {test_x.dtype} differ"
        )
    classes = num_classes or int(max(train_y.max(), test_y.max())) + 1
    for split, labels in (("train", train_y), ("test", test_y)):
        if int(labels.min()) < 0 or int(labels.max()) >= classes:
            raise DataError(
                f"workload {name}: {split} labels must lie in 0..{classes - 1} "
                f"(found {int(labels.min())}..{int(labels.max())})"
            )
    meta: dict[str, Any] = {
        "num_classes": classes,
        "input_shape": tuple(train_x.shape[1:]),
        "num_features": math.prod(train_x.shape[1:]),
    }
    integer_inputs = not train_x.dtype.is_floating_point
    if integer_inputs:
        meta["vocab_size"] = int(max(train_x.max(), test_x.max())) + 1
    size = DataSize(len(train_x), len(test_x))

    def locate_real(request: DataRequest) -> Located:
        return Located(Path(source), size)

    def load_real(request: DataRequest) -> TensorData:
        keep_train, keep_test = slice(request.max_train), slice(request.max_test)
        return TensorData(
            train_x=train_x[keep_train],
            train_y=train_y[keep_train],
            test_x=test_x[keep_test],
            test_y=test_y[keep_test],
            kind="real",
            source=source,
            meta=dict(meta),
        )

    def make_synthetic(request: DataRequest) -> TensorData:
        generator = torch.Generator().manual_seed(request.seed)
        num_train = request.max_train or size.num_train
        num_test = request.max_test or size.num_test

        def inputs(count: int) -> torch.Tensor:
            shape = (count, *train_x.shape[1:])
            if integer_inputs:
                return torch.randint(0, meta["vocab_size"], shape, generator=generator)
            return torch.randn(shape, generator=generator)

        return TensorData(
            train_x=inputs(num_train),
            train_y=torch.randint(0, classes, (num_train,), generator=generator),
            test_x=inputs(num_test),
            test_y=torch.randint(0, classes, (num_test,), generator=generator),
            kind="synthetic",
            source=f"synthetic: random inputs of {name}'s shapes, seed {request.seed}",
            meta=dict(meta),
        )

    return Workload(
        name=name,
        description=description or f"{name}: a classifier on arrays from {Path(source).name}",
        models={**(twins or {}), PYTORCH: model},
        locate_real=locate_real,
        load_real=load_real,
        make_synthetic=make_synthetic,
        synthetic_size=size,
        target_accuracy=target_accuracy,
        recipe=recipe,
        channels_last=channels_last,
    )


def _tensors(name: str, split: str, x: ArrayLike, y: ArrayLike) -> tuple[torch.Tensor, ...]:
    """(x, y) as tensors: float inputs as float32, integer ones and labels as int64."""
    x_array, y_array = np.asarray(x), np.asarray(y)
    if x_array.ndim < 2 or len(x_array) != len(y_array) or y_array.ndim != 1:
        raise DataError(
            f"workload {name}: {split} inputs {x_array.shape} and labels {y_array.shape} must be "
            "(N, ...) and (N,)"
        )
    if len(x_array) == 0:
        raise DataError(f"workload {name}: the {split} set is empty")
    if not np.issubdtype(y_array.dtype, np.integer):
        raise DataError(f"workload {name}: {split} labels must be integers, not {y_array.dtype}")
    if np.issubdtype(x_array.dtype, np.floating):
        x_tensor = torch.from_numpy(np.ascontiguousarray(x_array, dtype=np.float32))
    elif np.issubdtype(x_array.dtype, np.integer):
        x_tensor = torch.from_numpy(np.ascontiguousarray(x_array, dtype=np.int64))
    else:
        raise DataError(f"workload {name}: {split} inputs of dtype {x_array.dtype} are not numbers")
    return x_tensor, torch.from_numpy(np.ascontiguousarray(y_array, dtype=np.int64))


def _caller_file() -> str:
    """The file that called `array_workload` (where the arrays come from, for the record)."""
    return str(Path(sys._getframe(2).f_code.co_filename).resolve())
