"""Bidirectional LSTM / GRU text classifier in Keras: the twin of `trainscale.models.text_rnn`.

embedding -> dropout -> bidirectional LSTM or GRU under a mask of each text's real tokens ->
max and mean pooling over those tokens -> dropout -> linear classifier.

Inputs are (N, T) int token ids padded with 0 at the end. As in the torch model, a batch is
first cut to its longest text, and the mask stands in for torch's packed sequences: a masked
step leaves the state as it was, so the forward direction stops at each text's last real
token and the backward direction (which reads the reversed sequence, padding first) starts
there with a zero state. A text's output therefore does not depend on the padding after it.

Two layout details make the exact weight copy possible:

- torch's LSTM has two bias vectors per direction (input and recurrent), Keras' one. The
  cell here keeps both as weights (the same trainable parameters and the same training
  dynamics as torch) and hands their sum to Keras' kernels, so the fused cuDNN path
  still applies on a GPU.
- torch orders GRU gates (reset, update, new), Keras (update, reset, new); Keras' GRU with
  `reset_after=True` is torch's formulation, with the same two biases.

The padding id's embedding row is multiplied away (`embedding * (id != 0)`): torch's
`padding_idx` keeps that row at zero and never trains it, and this does the same for any
weights copied in.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from trainscale.models.tensorflow.dropout import ReplicaDropout
from trainscale.models.tensorflow.weights import assign, copy_dense, to_numpy
from trainscale.models.text_rnn import PAD_ID

CELLS = ("lstm", "gru")


def trim_to_longest(x: Any, min_len: int = 1) -> tuple[Any, Any]:
    """(x cut to the batch's longest text, or padded to `min_len` columns; lengths >= 1)."""
    x = tf.convert_to_tensor(x)
    lengths = tf.maximum(tf.reduce_sum(tf.cast(x != PAD_ID, tf.int32), axis=1), 1)
    width = tf.maximum(tf.reduce_max(lengths), min_len)
    x = tf.pad(x, [[0, 0], [0, tf.maximum(width - tf.shape(x)[1], 0)]])
    return x[:, :width], lengths


def valid_mask(lengths: Any, width: Any) -> Any:
    """(N, width) bool: True at each text's real positions."""
    return tf.range(width)[None, :] < lengths[:, None]


def embed(embedding: keras.layers.Embedding, x: Any) -> Any:
    """Token embeddings with the padding id's row read as zeros (torch's `padding_idx`)."""
    not_pad = ops.cast(ops.not_equal(x, PAD_ID), embedding.compute_dtype)
    return embedding(x) * not_pad[:, :, None]


class TorchLstmCell(keras.layers.LSTMCell):
    """Keras' LSTM cell with torch's two bias vectors, `input_bias` and `recurrent_bias`.

    `bias` (what Keras' step and cuDNN kernels read) is their sum, so both get gradients.
    """

    def build(self, input_shape: Any) -> None:
        gates = 4 * self.units
        self.kernel = self.add_weight(
            shape=(input_shape[-1], gates), name="kernel", initializer=self.kernel_initializer
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.units, gates),
            name="recurrent_kernel",
            initializer=self.recurrent_initializer,
        )
        self.input_bias = self.add_weight(shape=(gates,), name="input_bias", initializer="zeros")
        self.recurrent_bias = self.add_weight(
            shape=(gates,), name="recurrent_bias", initializer="zeros"
        )
        self.built = True

    @property
    def bias(self) -> Any:
        return self.input_bias + self.recurrent_bias


@keras.saving.register_keras_serializable(package="trainscale")
class TorchLstm(keras.layers.LSTM):
    """`keras.layers.LSTM` whose cell is a `TorchLstmCell` (registered: Bidirectional clones
    its layer through the config)."""

    cell: Any

    def __init__(self, units: int, **kwargs: Any):
        super().__init__(units, **kwargs)
        stock = self.cell
        # Replace the stock cell before anything builds it; stop tracking it so that it is
        # not left behind as an unbuilt sublayer.
        del self.cell
        tracker = getattr(self, "_tracker", None)
        if tracker is not None:
            tracker.untrack(stock)
        self.cell = TorchLstmCell(
            units,
            name="lstm_cell",
            dtype=kwargs.get("dtype"),
            activation=stock.activation,
            recurrent_activation=stock.recurrent_activation,
        )


def _rnn(cell: str, units: int, go_backwards: bool) -> keras.layers.Layer:
    if cell == "lstm":
        return TorchLstm(units, return_sequences=True, go_backwards=go_backwards)
    return keras.layers.GRU(
        units, return_sequences=True, go_backwards=go_backwards, reset_after=True
    )


class TextRNN(keras.Model):
    """Embedding + bidirectional LSTM/GRU + max-and-mean pooling + linear classifier."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        cell: str = "lstm",
        embed_dim: int = 128,
        hidden_size: int = 128,
        dropout: float = 0.5,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {', '.join(CELLS)}, got {cell!r}")
        self.cell_kind = cell
        self.embedding = keras.layers.Embedding(vocab_size, embed_dim)
        self.dropout = ReplicaDropout(dropout)
        self.rnn = keras.layers.Bidirectional(
            _rnn(cell, hidden_size, go_backwards=False),
            backward_layer=_rnn(cell, hidden_size, go_backwards=True),
        )
        self.classifier = keras.layers.Dense(num_classes)

    def call(self, x: Any, training: bool = False) -> Any:
        x, lengths = trim_to_longest(x)
        mask = valid_mask(lengths, tf.shape(x)[1])
        embedded = self.dropout(embed(self.embedding, x), training=training)
        out = self.rnn(embedded, mask=mask, training=training)
        real = ops.cast(mask, out.dtype)[:, :, None]
        mean = ops.sum(out * real, axis=1) / ops.cast(lengths, out.dtype)[:, None]
        most = ops.max(ops.where(mask[:, :, None], out, ops.cast(-np.inf, out.dtype)), axis=1)
        pooled = ops.concatenate([most, mean], axis=1)
        return self.classifier(self.dropout(pooled, training=training))


def build(vocab_size: int, num_classes: int, cell: str = "lstm") -> TextRNN:
    """The model with its weights created (called once on a dummy batch)."""
    model = TextRNN(vocab_size, num_classes, cell=cell)
    model(np.ones((1, 4), np.int32))
    return model


def _torch_gates(array: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """Reorder the gate blocks along axis 0 of a torch RNN weight or bias."""
    blocks = np.split(array, len(order), axis=0)
    return np.concatenate([blocks[i] for i in order], axis=0)


# Keras gate order, as indices into torch's: LSTM i,f,g,o both; GRU torch r,z,n -> Keras z,r,n.
GATE_ORDER = {"lstm": (0, 1, 2, 3), "gru": (1, 0, 2)}


def _copy_direction(torch_rnn: Any, suffix: str, layer: Any, cell: str) -> None:
    order = GATE_ORDER[cell]

    def weight(name: str) -> np.ndarray:
        return _torch_gates(to_numpy(getattr(torch_rnn, f"{name}_l0{suffix}")), order)

    assign(layer.cell.kernel, weight("weight_ih").T)
    assign(layer.cell.recurrent_kernel, weight("weight_hh").T)
    if cell == "lstm":
        assign(layer.cell.input_bias, weight("bias_ih"))
        assign(layer.cell.recurrent_bias, weight("bias_hh"))
    else:
        assign(layer.cell.bias, np.stack([weight("bias_ih"), weight("bias_hh")]))


def copy_torch_weights(torch_model: Any, model: TextRNN) -> None:
    """Copy the embedding, both RNN directions and the classifier of a torch `TextRNN`."""
    torch_cell = type(torch_model.rnn).__name__.lower()
    if torch_cell != model.cell_kind:
        raise ValueError(f"cannot copy a torch {torch_cell} into a Keras {model.cell_kind}")
    assign(model.embedding.embeddings, to_numpy(torch_model.embedding.weight))
    _copy_direction(torch_model.rnn, "", model.rnn.forward_layer, model.cell_kind)
    _copy_direction(torch_model.rnn, "_reverse", model.rnn.backward_layer, model.cell_kind)
    copy_dense(torch_model.classifier, model.classifier)
