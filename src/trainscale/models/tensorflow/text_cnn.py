"""A small CNN over word embeddings (Kim 2014) in Keras: the twin of `trainscale.models.text_cnn`.

embedding -> parallel 1-D convolutions of widths 3, 4, 5 -> ReLU -> max over each text's
valid windows -> dropout -> linear classifier. Inputs are (N, T) int token ids padded with 0
at the end; a batch is cut to its longest text (at least the widest filter), and windows
that start past a text's end are left out of the max, as in the torch model.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from trainscale.models.tensorflow.dropout import ReplicaDropout
from trainscale.models.tensorflow.text_rnn import embed, trim_to_longest
from trainscale.models.tensorflow.weights import (
    assign,
    conv1d_kernel,
    copy_dense,
    to_numpy,
)


class TextCNN(keras.Model):
    """Embedding + convolutions of several widths + max-over-time pooling + linear."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        embed_dim: int = 128,
        widths: tuple[int, ...] = (3, 4, 5),
        filters: int = 100,
        dropout: float = 0.5,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.widths = tuple(widths)
        self.embedding = keras.layers.Embedding(vocab_size, embed_dim)
        self.convs = [keras.layers.Conv1D(filters, w, activation="relu") for w in self.widths]
        self.dropout = ReplicaDropout(dropout)
        self.classifier = keras.layers.Dense(num_classes)

    def call(self, x: Any, training: bool = False) -> Any:
        x, lengths = trim_to_longest(x, min_len=max(self.widths))
        embedded = embed(self.embedding, x)  # (N, T, E): Keras convolves channels-last
        pooled = []
        for width, conv in zip(self.widths, self.convs, strict=True):
            features = conv(embedded)  # (N, T - width + 1, F)
            # Valid windows start inside the text and, for a text at least `width` long,
            # end inside it; a shorter text keeps its first window (see the torch model).
            last_start = tf.maximum(lengths - width, 0)
            valid = tf.range(tf.shape(features)[1])[None, :] <= last_start[:, None]
            most = ops.where(valid[:, :, None], features, ops.cast(-np.inf, features.dtype))
            pooled.append(ops.max(most, axis=1))
        return self.classifier(self.dropout(ops.concatenate(pooled, axis=1), training=training))


def build(vocab_size: int, num_classes: int) -> TextCNN:
    """The model with its weights created (called once on a dummy batch)."""
    model = TextCNN(vocab_size, num_classes)
    model(np.ones((1, 4), np.int32))
    return model


def copy_torch_weights(torch_model: Any, model: TextCNN) -> None:
    """Copy the embedding, every convolution and the classifier of a torch `TextCNN`."""
    if tuple(torch_model.widths) != model.widths:
        raise ValueError(f"cannot copy widths {torch_model.widths} into widths {model.widths}")
    assign(model.embedding.embeddings, to_numpy(torch_model.embedding.weight))
    for torch_conv, conv in zip(torch_model.convs, model.convs, strict=True):
        assign(conv.kernel, conv1d_kernel(torch_conv.weight))
        assign(conv.bias, to_numpy(torch_conv.bias))
    copy_dense(torch_model.classifier, model.classifier)
