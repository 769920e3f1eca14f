"""LSTM and GRU cells with torch's equations and parameters, for flax.linen.RNN.

flax's own LSTMCell and GRUCell compute the same gates but keep one bias where torch keeps
two (b_ih and b_hh): equal outputs are possible, equal parameter counts and a one-to-one
weight copy are not. These cells keep torch's layout: an input projection `ih` (kernel
(in, G*H), bias) and a recurrent projection `hh` (kernel (H, G*H), bias), with the gates in
torch's order (LSTM i, f, g, o; GRU r, z, n).

The input projection does not depend on the carry, so `Direction` applies it to the whole
sequence in one matrix product before the scan, and the cells receive pre-projected inputs
(`x W_ih + b_ih`): the scan then does only the recurrent product per step, as torch's fused
kernels do.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn

GATES = {"lstm": 4, "gru": 3}


class _TorchCell(nn.RNNCellBase):
    hidden_size: int
    dtype: Any = jnp.float32

    @property
    def num_feature_axes(self) -> int:
        return 1

    def _zeros(self, input_shape: tuple[int, ...]) -> jnp.ndarray:
        return jnp.zeros((*input_shape[:-1], self.hidden_size), self.dtype)

    def _recurrent(self, h: jnp.ndarray, gates: int) -> jnp.ndarray:
        return nn.Dense(gates * self.hidden_size, dtype=self.dtype, name="hh")(h)


class TorchLSTMCell(_TorchCell):
    """torch.nn.LSTM's cell on pre-projected inputs; carry (c, h).

    i, f, g, o = x W_ih + b_ih + h W_hh + b_hh;  c' = s(f) c + s(i) tanh(g);  h' = s(o) tanh(c').
    """

    @nn.compact
    def __call__(self, carry: tuple[jnp.ndarray, jnp.ndarray], projected: jnp.ndarray) -> Any:
        c, h = carry
        gates = projected + self._recurrent(h, 4)
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (c, h), h

    @nn.nowrap
    def initialize_carry(self, rng: Any, input_shape: tuple[int, ...]) -> Any:
        del rng
        return self._zeros(input_shape), self._zeros(input_shape)


class TorchGRUCell(_TorchCell):
    """torch.nn.GRU's cell on pre-projected inputs; carry h.

    r = s(x_r + h_r), z = s(x_z + h_z), n = tanh(x_n + r * h_n), h' = (1 - z) n + z h, where
    x_* = x W_i* + b_i* and h_* = h W_h* + b_h*: the reset gate scales the recurrent term
    including its bias, as in torch (and unlike the original Cho et al. cell).
    """

    @nn.compact
    def __call__(self, carry: jnp.ndarray, projected: jnp.ndarray) -> Any:
        h = carry
        x_r, x_z, x_n = jnp.split(projected, 3, axis=-1)
        h_r, h_z, h_n = jnp.split(self._recurrent(h, 3), 3, axis=-1)
        r = jax.nn.sigmoid(x_r + h_r)
        z = jax.nn.sigmoid(x_z + h_z)
        n = jnp.tanh(x_n + r * h_n)
        h = (1.0 - z) * n + z * h
        return h, h

    @nn.nowrap
    def initialize_carry(self, rng: Any, input_shape: tuple[int, ...]) -> Any:
        del rng
        return self._zeros(input_shape)


CELLS = {"lstm": TorchLSTMCell, "gru": TorchGRUCell}


class Direction(nn.Module):
    """One direction of a bidirectional layer over (N, T, E) inputs with per-text lengths.

    `reverse=True` reads each text from its last real token back to its first (flax flips
    only the first `lengths` steps), and returns the outputs in the original order. Outputs
    at padding positions are not meaningful: the caller masks them.
    """

    cell: str
    hidden_size: int
    reverse: bool = False
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, inputs: jnp.ndarray, lengths: jnp.ndarray) -> jnp.ndarray:
        projected = nn.Dense(GATES[self.cell] * self.hidden_size, dtype=self.dtype, name="ih")(
            inputs
        )
        rnn = nn.RNN(
            CELLS[self.cell](self.hidden_size, dtype=self.dtype, name="cell"),
            reverse=self.reverse,
            keep_order=True,
            name="rnn",
        )
        outputs = rnn(projected, seq_lengths=lengths)  # the outputs, not the carry
        assert not isinstance(outputs, tuple)
        return outputs
