"""A small CNN over word embeddings (Kim 2014) in flax.linen: twin of trainscale.models.text_cnn.

embedding -> parallel 1-D convolutions of widths 3, 4, 5 -> ReLU -> max over each text's
valid windows -> dropout -> linear. Inputs are (N, T) int token ids padded with 0 at the
end. Shapes are static under jit, so the batch is not trimmed to its longest text as the
torch model does; windows that start past a text's end are left out of the max instead, so
a text's output does not depend on the padding after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import torch
from flax import linen as nn

from trainscale.models.jax.text_common import PAD_ID, PadEmbed, text_lengths
from trainscale.models.jax.torch_weights import TorchState, Tree, count_modules, embedding_table


class TextCNN(nn.Module):
    """Embedding + convolutions of several widths + max-over-time pooling + linear."""

    vocab_size: int
    num_classes: int
    embed_dim: int = 128
    widths: Sequence[int] = (3, 4, 5)
    filters: int = 100
    dropout: float = 0.5
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        lengths = text_lengths(x)
        widest = max(self.widths)
        if x.shape[1] < widest:  # at least one window of the widest filter
            x = jnp.pad(x, ((0, 0), (0, widest - x.shape[1])), constant_values=PAD_ID)
        embedded = PadEmbed(self.vocab_size, self.embed_dim, dtype=self.dtype, name="embedding")(x)
        pooled = []
        for index, width in enumerate(self.widths):
            conv = nn.Conv(
                self.filters, (width,), padding="VALID", dtype=self.dtype, name=f"conv_{index}"
            )
            features = nn.relu(conv(embedded))  # (N, T - width + 1, F)
            # A window is valid if it starts inside the text and, when the text is at least
            # `width` long, ends inside it; a shorter text keeps its first window.
            last_start = jnp.maximum(lengths - width, 0)
            starts = jnp.arange(features.shape[1])
            valid = (starts[None, :] <= last_start[:, None])[..., None]
            pooled.append(jnp.max(jnp.where(valid, features, -jnp.inf), axis=1))
        out = nn.Dropout(self.dropout, deterministic=not train)(jnp.concatenate(pooled, axis=1))
        return nn.Dense(self.num_classes, dtype=self.dtype, name="classifier")(out)


def from_torch(model: torch.nn.Module) -> Tree:
    """TextCNN: embedding, the 1-D convolutions (OIW -> WIO), classifier."""
    state = TorchState(model)
    params: Tree = {"embedding": embedding_table(state)}
    for index in range(count_modules(model, "convs")):
        params[f"conv_{index}"] = state.conv(f"convs.{index}")
    params["classifier"] = state.linear("classifier")
    state.done()
    return {"params": params}
