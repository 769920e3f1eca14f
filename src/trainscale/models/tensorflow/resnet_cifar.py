"""The CIFAR ResNets (depth 6n+2) in Keras: the twin of `trainscale.models.resnet_cifar`.

NHWC input. Two details keep it the same function as the torch model:

- A 3x3 convolution with stride 2 pads one pixel on every side, as torch's `padding=1`
  does; Keras' `padding="same"` would pad only the bottom and right of an even-sized map
  and shift every output by one pixel. So each convolution is an explicit one-pixel
  `ZeroPadding2D` and a "valid" convolution.
- BatchNorm: epsilon 1e-5 and momentum 0.9 (torch's momentum 0.1 counts the other way).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from trainscale.models.resnet_cifar import STAGE_WIDTHS, blocks_for_depth
from trainscale.models.tensorflow.weights import (
    assign,
    conv2d_kernel,
    copy_batch_norm,
    copy_dense,
)

IMAGE_SHAPE = (32, 32, 3)
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9  # torch momentum 0.1: new = 0.9 * old + 0.1 * batch


def _batch_norm() -> keras.layers.BatchNormalization:
    return keras.layers.BatchNormalization(epsilon=BN_EPSILON, momentum=BN_MOMENTUM)


class Conv3x3(keras.layers.Layer):
    """A bias-free 3x3 convolution padded by one pixel on every side (torch `padding=1`)."""

    def __init__(self, filters: int, stride: int = 1, **kwargs: Any):
        super().__init__(**kwargs)
        self.pad = keras.layers.ZeroPadding2D(1)
        self.conv = keras.layers.Conv2D(
            filters,
            3,
            strides=stride,
            padding="valid",
            use_bias=False,
            kernel_initializer=keras.initializers.HeNormal(),
        )

    def call(self, x: Any) -> Any:
        return self.conv(self.pad(x))


class ZeroPadShortcut(keras.layers.Layer):
    """Option-A shortcut: stride-2 subsampling, then zero channels on both sides."""

    def __init__(self, in_channels: int, out_channels: int, **kwargs: Any):
        super().__init__(**kwargs)
        extra = out_channels - in_channels
        self.pad_front, self.pad_back = extra // 2, extra - extra // 2

    def call(self, x: Any) -> Any:
        x = x[:, ::2, ::2, :]
        return ops.pad(x, ((0, 0), (0, 0), (0, 0), (self.pad_front, self.pad_back)))


class BasicBlock(keras.layers.Layer):
    """conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.conv1 = Conv3x3(out_channels, stride)
        self.bn1 = _batch_norm()
        self.conv2 = Conv3x3(out_channels)
        self.bn2 = _batch_norm()
        self.shortcut = (
            ZeroPadShortcut(in_channels, out_channels)
            if stride != 1 or in_channels != out_channels
            else None
        )

    def call(self, x: Any, training: bool = False) -> Any:
        out = ops.relu(self.bn1(self.conv1(x), training=training))
        out = self.bn2(self.conv2(out), training=training)
        residual = x if self.shortcut is None else self.shortcut(x)
        return ops.relu(out + residual)


class ResNetCifar(keras.Model):
    """ResNet for 32x32 NHWC inputs with `blocks_per_stage` (n) basic blocks per stage."""

    def __init__(self, blocks_per_stage: int, num_classes: int = 10, **kwargs: Any):
        super().__init__(**kwargs)
        self.conv = Conv3x3(STAGE_WIDTHS[0])
        self.bn = _batch_norm()
        self.blocks = []
        channels = STAGE_WIDTHS[0]
        for stage, width in enumerate(STAGE_WIDTHS):
            for block in range(blocks_per_stage):
                stride = 2 if stage > 0 and block == 0 else 1
                self.blocks.append(BasicBlock(channels, width, stride))
                channels = width
        self.pool = keras.layers.GlobalAveragePooling2D()
        self.fc = keras.layers.Dense(num_classes)

    def call(self, x: Any, training: bool = False) -> Any:
        x = ops.relu(self.bn(self.conv(x), training=training))
        for block in self.blocks:
            x = block(x, training=training)
        return self.fc(self.pool(x))


def build(depth: int, num_classes: int = 10) -> ResNetCifar:
    """The 6n+2-layer model with its weights created (called once on a dummy batch)."""
    model = ResNetCifar(blocks_for_depth(depth), num_classes)
    model(np.zeros((1, *IMAGE_SHAPE), np.float32))
    return model


def copy_torch_weights(torch_model: Any, model: ResNetCifar) -> None:
    """Copy every convolution, BatchNorm (with running statistics) and the classifier."""
    if len(torch_model.blocks) != len(model.blocks):
        raise ValueError(
            f"cannot copy a ResNet of {len(torch_model.blocks)} blocks into one of "
            f"{len(model.blocks)}"
        )
    assign(model.conv.conv.kernel, conv2d_kernel(torch_model.conv.weight))
    copy_batch_norm(torch_model.bn, model.bn)
    for torch_block, block in zip(torch_model.blocks, model.blocks, strict=True):
        assign(block.conv1.conv.kernel, conv2d_kernel(torch_block.conv1.weight))
        copy_batch_norm(torch_block.bn1, block.bn1)
        assign(block.conv2.conv.kernel, conv2d_kernel(torch_block.conv2.weight))
        copy_batch_norm(torch_block.bn2, block.bn2)
    copy_dense(torch_model.fc, model.fc)
