"""The CIFAR ResNets of He et al. 2016 in flax.linen: the twin of trainscale.models.resnet_cifar.

NHWC input (N, 32, 32, 3). Identity shortcuts, and "option A" where a stage halves the map
and doubles the channels (stride-2 subsampling, zero channels padded on both sides), so
shortcuts add no parameters. Convolutions pad 1 on each side explicitly, as torch does:
flax's "SAME" pads a stride-2 convolution on one side only, which shifts the sampled grid.
BatchNorm: momentum 0.9 (torch's 0.1), eps 1e-5, running statistics in "batch_stats".
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax.numpy as jnp
import torch
from flax import linen as nn

from trainscale.models.jax.torch_weights import TorchState, Tree, count_modules

STAGE_WIDTHS = (16, 32, 64)
BN_MOMENTUM = 0.9  # torch's momentum 0.1: running = 0.9 running + 0.1 batch
BN_EPSILON = 1e-5


def _conv(features: int, stride: int, dtype: Any, name: str) -> nn.Conv:
    return nn.Conv(
        features,
        (3, 3),
        strides=(stride, stride),
        padding=((1, 1), (1, 1)),
        use_bias=False,
        dtype=dtype,
        name=name,
    )


def zero_pad_shortcut(x: jnp.ndarray, out_channels: int) -> jnp.ndarray:
    """Option-A shortcut: stride-2 subsampling, then zero channels on both sides."""
    extra = out_channels - x.shape[-1]
    x = x[:, ::2, ::2, :]
    return jnp.pad(x, ((0, 0), (0, 0), (0, 0), (extra // 2, extra - extra // 2)))


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU."""

    out_channels: int
    stride: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool) -> jnp.ndarray:
        norm = partial(
            nn.BatchNorm,
            use_running_average=not train,
            momentum=BN_MOMENTUM,
            epsilon=BN_EPSILON,
            dtype=self.dtype,
        )
        out = _conv(self.out_channels, self.stride, self.dtype, "conv1")(x)
        out = nn.relu(norm(name="bn1")(out))
        out = norm(name="bn2")(_conv(self.out_channels, 1, self.dtype, "conv2")(out))
        if self.stride != 1 or x.shape[-1] != self.out_channels:
            shortcut = zero_pad_shortcut(x, self.out_channels)
        else:
            shortcut = x
        return nn.relu(out + shortcut)


class ResNetCifar(nn.Module):
    """ResNet for 32x32 inputs with `blocks_per_stage` (n) basic blocks per stage: 6n+2 layers."""

    blocks_per_stage: int
    num_classes: int = 10
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        x = _conv(STAGE_WIDTHS[0], 1, self.dtype, "conv")(x)
        x = nn.BatchNorm(
            use_running_average=not train,
            momentum=BN_MOMENTUM,
            epsilon=BN_EPSILON,
            dtype=self.dtype,
            name="bn",
        )(x)
        x = nn.relu(x)
        index = 0
        for stage, width in enumerate(STAGE_WIDTHS):
            for block in range(self.blocks_per_stage):
                stride = 2 if stage > 0 and block == 0 else 1
                x = BasicBlock(width, stride, dtype=self.dtype, name=f"block_{index}")(x, train)
                index += 1
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=self.dtype, name="fc")(x)


def from_torch(model: torch.nn.Module) -> Tree:
    """ResNetCifar: stem convolution and BN, every block's two convolutions and BNs, fc."""
    state = TorchState(model)
    params: Tree = {"conv": state.conv("conv", bias=False)}
    stats: Tree = {}
    params["bn"], stats["bn"] = state.batch_norm("bn")
    for index in range(count_modules(model, "blocks")):
        prefix = f"blocks.{index}"
        block_params: Tree = {}
        block_stats: Tree = {}
        for layer in ("1", "2"):
            block_params[f"conv{layer}"] = state.conv(f"{prefix}.conv{layer}", bias=False)
            block_params[f"bn{layer}"], block_stats[f"bn{layer}"] = state.batch_norm(
                f"{prefix}.bn{layer}"
            )
        params[f"block_{index}"], stats[f"block_{index}"] = block_params, block_stats
    params["fc"] = state.linear("fc")
    state.done()
    return {"params": params, "batch_stats": stats}
