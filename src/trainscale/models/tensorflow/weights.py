"""Helpers that copy torch tensors into Keras variables, checking every shape."""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(tensor: Any) -> np.ndarray:
    """A torch tensor (parameter or buffer) as a float32 numpy array."""
    return tensor.detach().cpu().numpy().astype(np.float32, copy=False)


def assign(variable: Any, value: np.ndarray, name: str = "") -> None:
    """`variable` := `value`; ValueError when the shapes differ (a wrong mapping)."""
    if tuple(variable.shape) != tuple(value.shape):
        raise ValueError(
            f"cannot copy {name or variable.path}: torch shape {tuple(value.shape)}, "
            f"Keras shape {tuple(variable.shape)}"
        )
    variable.assign(value.astype(variable.dtype, copy=False))


def linear_kernel(weight: Any) -> np.ndarray:
    """torch Linear (out, in) -> Keras Dense (in, out)."""
    return to_numpy(weight).T


def conv2d_kernel(weight: Any) -> np.ndarray:
    """torch Conv2d (out, in, kh, kw) -> Keras Conv2D (kh, kw, in, out)."""
    return to_numpy(weight).transpose(2, 3, 1, 0)


def conv1d_kernel(weight: Any) -> np.ndarray:
    """torch Conv1d (out, in, k) -> Keras Conv1D (k, in, out)."""
    return to_numpy(weight).transpose(2, 1, 0)


def copy_batch_norm(torch_bn: Any, keras_bn: Any) -> None:
    """Scale, shift and the running statistics of a BatchNorm layer."""
    assign(keras_bn.gamma, to_numpy(torch_bn.weight))
    assign(keras_bn.beta, to_numpy(torch_bn.bias))
    assign(keras_bn.moving_mean, to_numpy(torch_bn.running_mean))
    assign(keras_bn.moving_variance, to_numpy(torch_bn.running_var))


def copy_dense(torch_linear: Any, keras_dense: Any) -> None:
    """Weight and bias of a linear layer."""
    assign(keras_dense.kernel, linear_kernel(torch_linear.weight))
    assign(keras_dense.bias, to_numpy(torch_linear.bias))
