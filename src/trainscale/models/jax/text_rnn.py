"""Bidirectional LSTM / GRU text classifier in flax.linen: twin of trainscale.models.text_rnn.

embedding -> dropout -> 1-layer bidirectional LSTM or GRU -> max and mean pooling over each
text's real tokens -> dropout -> linear classifier. Inputs are (N, T) int token ids padded
with 0 at the end. As with the torch model's packed sequences, the backward direction starts
at each text's last real token and the pooling reads real positions only, so a text's output
does not depend on how much padding follows it. Shapes are static under jit, so the batch is
not trimmed to its longest text (a trainer may bucket lengths instead).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import torch
from flax import linen as nn

from trainscale.models.jax.recurrent import CELLS, Direction
from trainscale.models.jax.text_common import PadEmbed, text_lengths, valid_mask
from trainscale.models.jax.torch_weights import TorchState, Tree, embedding_table


class TextRNN(nn.Module):
    """Embedding + bidirectional LSTM/GRU + max-and-mean pooling + linear classifier."""

    vocab_size: int
    num_classes: int
    cell: str = "lstm"
    embed_dim: int = 128
    hidden_size: int = 128
    dropout: float = 0.5
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        if self.cell not in CELLS:
            raise ValueError(f"cell must be one of {', '.join(CELLS)}, got {self.cell!r}")
        lengths = text_lengths(x)
        embedded = PadEmbed(self.vocab_size, self.embed_dim, dtype=self.dtype, name="embedding")(x)
        embedded = nn.Dropout(self.dropout, deterministic=not train)(embedded)
        outputs = [
            Direction(self.cell, self.hidden_size, reverse, dtype=self.dtype, name=name)(
                embedded, lengths
            )
            for name, reverse in (("forward", False), ("backward", True))
        ]
        out = jnp.concatenate(outputs, axis=-1)  # (N, T, 2H): forward then backward, as torch
        mask = valid_mask(lengths, x.shape[1])[..., None]
        mean = jnp.sum(jnp.where(mask, out, 0), axis=1) / lengths[:, None].astype(out.dtype)
        most = jnp.max(jnp.where(mask, out, -jnp.inf), axis=1)
        pooled = nn.Dropout(self.dropout, deterministic=not train)(
            jnp.concatenate([most, mean], axis=1)
        )
        return nn.Dense(self.num_classes, dtype=self.dtype, name="classifier")(pooled)


def from_torch(model: torch.nn.Module) -> Tree:
    """TextRNN: embedding, both directions of the 1-layer LSTM/GRU, classifier.

    torch's W_ih (G*H, E) and W_hh (G*H, H) hold the gates stacked in its order (LSTM i, f,
    g, o; GRU r, z, n); the JAX cells split their projections in the same order, so the copy
    is a transpose per matrix, with both biases kept apart as torch keeps them.
    """
    state = TorchState(model)
    params: Tree = {"embedding": embedding_table(state)}
    for name, suffix in (("forward", ""), ("backward", "_reverse")):
        params[name] = {
            "ih": {
                "kernel": state.take(f"rnn.weight_ih_l0{suffix}").T,
                "bias": state.take(f"rnn.bias_ih_l0{suffix}"),
            },
            "cell": {
                "hh": {
                    "kernel": state.take(f"rnn.weight_hh_l0{suffix}").T,
                    "bias": state.take(f"rnn.bias_hh_l0{suffix}"),
                }
            },
        }
    params["classifier"] = state.linear("classifier")
    state.done()
    return {"params": params}
