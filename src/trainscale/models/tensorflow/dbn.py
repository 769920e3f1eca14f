"""The deep belief network in Keras: the twin of `trainscale.models.dbn`.

Each RBM is a layer whose up-pass is the classifier's sigmoid hidden layer; its visible
bias is a non-trainable variable (only contrastive-divergence pre-training,
`trainscale.models.tensorflow.dbn_pretrain`, changes it), as the torch model keeps it
in a buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from trainscale.models.tensorflow.weights import assign, copy_dense, to_numpy


class Rbm(keras.layers.Layer):
    """A Bernoulli-Bernoulli RBM: p(h=1|v) = sigmoid(v W + c), p(v=1|h) = sigmoid(h W^T + b).

    `kernel` is (visible, hidden), the transpose of the torch model's `weight`.
    """

    def __init__(self, num_visible: int, num_hidden: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.num_visible, self.num_hidden = num_visible, num_hidden
        self.kernel = self.add_weight(
            shape=(num_visible, num_hidden),
            initializer=keras.initializers.RandomNormal(stddev=0.01),
            name="kernel",
        )
        self.hidden_bias = self.add_weight(
            shape=(num_hidden,), initializer="zeros", name="hidden_bias"
        )
        self.visible_bias = self.add_weight(
            shape=(num_visible,), initializer="zeros", name="visible_bias", trainable=False
        )

    def hidden_probs(self, visible: Any) -> Any:
        """p(h=1 | v) for a batch of visible vectors (batch x visible)."""
        return ops.sigmoid(ops.matmul(visible, self.kernel) + self.hidden_bias)

    def visible_probs(self, hidden: Any) -> Any:
        """p(v=1 | h) for a batch of hidden vectors (batch x hidden)."""
        return ops.sigmoid(ops.matmul(hidden, ops.transpose(self.kernel)) + self.visible_bias)

    def call(self, visible: Any) -> Any:
        return self.hidden_probs(visible)


class DeepBeliefNet(keras.Model):
    """RBMs stacked input-to-top, unrolled into sigmoid layers, plus a linear head (logits)."""

    def __init__(
        self, num_inputs: int, hidden_sizes: Sequence[int], num_classes: int, **kwargs: Any
    ):
        super().__init__(**kwargs)
        if not hidden_sizes:
            raise ValueError("a deep belief network needs at least one hidden layer")
        sizes = [num_inputs, *hidden_sizes]
        self.num_inputs = num_inputs
        self.rbms = [Rbm(sizes[i], sizes[i + 1], name=f"rbm_{i}") for i in range(len(hidden_sizes))]
        self.head = keras.layers.Dense(num_classes, name="head")

    def features(self, x: Any, depth: int | None = None) -> Any:
        """Hidden probabilities after the first `depth` RBMs (all of them by default)."""
        x = ops.reshape(x, (-1, self.num_inputs))
        for rbm in self.rbms[:depth]:
            x = rbm(x)
        return x

    def call(self, x: Any, training: bool = False) -> Any:
        return self.head(self.features(x))


def build(num_inputs: int, hidden_sizes: Sequence[int], num_classes: int) -> DeepBeliefNet:
    """The model with its weights created (called once on a dummy batch)."""
    model = DeepBeliefNet(num_inputs, hidden_sizes, num_classes)
    model(np.zeros((1, num_inputs), np.float32))
    return model


def copy_torch_weights(torch_model: Any, model: DeepBeliefNet) -> None:
    """Copy every RBM (weight, both biases) and the head of a torch `DeepBeliefNet`."""
    if len(torch_model.rbms) != len(model.rbms):
        raise ValueError(
            f"cannot copy a DBN of {len(torch_model.rbms)} RBMs into one of {len(model.rbms)}"
        )
    for torch_rbm, rbm in zip(torch_model.rbms, model.rbms, strict=True):
        assign(rbm.kernel, to_numpy(torch_rbm.weight).T)
        assign(rbm.hidden_bias, to_numpy(torch_rbm.hidden_bias))
        assign(rbm.visible_bias, to_numpy(torch_rbm.visible_bias))
    copy_dense(torch_model.head, model.head)
