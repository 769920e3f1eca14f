"""The classic MNIST CNN in Keras: the twin of `trainscale.models.mnist_cnn` (NHWC input)."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from trainscale.models.tensorflow.dropout import ReplicaDropout
from trainscale.models.tensorflow.weights import (
    assign,
    conv2d_kernel,
    copy_dense,
    to_numpy,
)

IMAGE_SHAPE = (28, 28, 1)


class MnistCnn(keras.Model):
    """Two 3x3 convolutions (32, 64 channels), 2x2 max-pool, dropout, 128-unit dense."""

    def __init__(
        self,
        num_classes: int = 10,
        dropout_conv: float = 0.25,
        dropout_fc: float = 0.5,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.conv1 = keras.layers.Conv2D(32, 3, activation="relu")
        self.conv2 = keras.layers.Conv2D(64, 3, activation="relu")
        self.pool = keras.layers.MaxPooling2D(2)
        self.dropout_conv = ReplicaDropout(dropout_conv)
        self.flatten = keras.layers.Flatten()
        self.fc1 = keras.layers.Dense(128, activation="relu")
        self.dropout_fc = ReplicaDropout(dropout_fc)
        self.fc2 = keras.layers.Dense(num_classes)

    def call(self, x: Any, training: bool = False) -> Any:
        x = self.dropout_conv(self.pool(self.conv2(self.conv1(x))), training=training)
        x = self.dropout_fc(self.fc1(self.flatten(x)), training=training)
        return self.fc2(x)


def build(num_classes: int = 10) -> MnistCnn:
    """The model with its weights created (called once on a dummy batch)."""
    model = MnistCnn(num_classes)
    model(np.zeros((1, *IMAGE_SHAPE), np.float32))
    return model


def copy_torch_weights(torch_model: Any, model: MnistCnn) -> None:
    """Copy every weight of a `trainscale.models.mnist_cnn.MnistCnn` into `model`."""
    conv1, conv2 = torch_model.features[0], torch_model.features[2]
    fc1, fc2 = torch_model.classifier[1], torch_model.classifier[4]
    assign(model.conv1.kernel, conv2d_kernel(conv1.weight))
    assign(model.conv1.bias, to_numpy(conv1.bias))
    assign(model.conv2.kernel, conv2d_kernel(conv2.weight))
    assign(model.conv2.bias, to_numpy(conv2.bias))
    # torch flattens (C, H, W), Keras (H, W, C): reorder the dense layer's input rows.
    channels = conv2.weight.shape[0]
    side = int(round((fc1.weight.shape[1] // channels) ** 0.5))
    weight = to_numpy(fc1.weight).reshape(-1, channels, side, side)  # (out, C, H, W)
    assign(model.fc1.kernel, weight.transpose(2, 3, 1, 0).reshape(-1, weight.shape[0]))
    assign(model.fc1.bias, to_numpy(fc1.bias))
    copy_dense(fc2, model.fc2)
