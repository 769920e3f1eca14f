"""The classic MNIST CNN in flax.linen: the twin of trainscale.models.mnist_cnn.MnistCnn."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import torch
from flax import linen as nn

from trainscale.models.jax.torch_weights import TorchState, Tree


class MnistCnn(nn.Module):
    """Two 3x3 convolutions (32, 64 channels), 2x2 max-pool, dropout, 128-unit dense.

    Takes NHWC images (N, 28, 28, 1). The dense layer sees the pooled maps flattened in
    (H, W, C) order; the weight copy from torch (which flattens (C, H, W)) permutes its rows.
    """

    num_classes: int = 10
    dropout_conv: float = 0.25
    dropout_fc: float = 0.5
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        x = nn.relu(nn.Conv(32, (3, 3), padding="VALID", dtype=self.dtype, name="conv1")(x))
        x = nn.relu(nn.Conv(64, (3, 3), padding="VALID", dtype=self.dtype, name="conv2")(x))
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.Dropout(self.dropout_conv, deterministic=not train)(x)
        x = x.reshape(x.shape[0], -1)
        x = nn.relu(nn.Dense(128, dtype=self.dtype, name="fc1")(x))
        x = nn.Dropout(self.dropout_fc, deterministic=not train)(x)
        return nn.Dense(self.num_classes, dtype=self.dtype, name="fc2")(x)


def from_torch(model: torch.nn.Module) -> Tree:
    """MnistCnn: features.0/2 convolutions, classifier.1/4 dense layers."""
    state = TorchState(model)
    fc1 = state.linear("classifier.1")
    # torch flattens the pooled maps as (C, H, W), flax as (H, W, C): permute the rows.
    channels, height, width = 64, 12, 12
    kernel = fc1["kernel"].reshape(channels, height, width, -1)
    fc1["kernel"] = kernel.transpose(1, 2, 0, 3).reshape(channels * height * width, -1)
    params = {
        "conv1": state.conv("features.0"),
        "conv2": state.conv("features.2"),
        "fc1": fc1,
        "fc2": state.linear("classifier.4"),
    }
    state.done()
    return {"params": params}
