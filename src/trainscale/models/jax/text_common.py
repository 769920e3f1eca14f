"""What the JAX text models share: padding, lengths and the padding-aware embedding."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from flax import linen as nn

PAD_ID = 0  # trainscale.data.text.PAD_ID: texts are padded with 0 at the end


def text_lengths(x: jnp.ndarray) -> jnp.ndarray:
    """Each text's number of real tokens, at least 1 (an empty text reads one pad token)."""
    return jnp.maximum(jnp.sum(x != PAD_ID, axis=1), 1)


def valid_mask(lengths: jnp.ndarray, width: int) -> jnp.ndarray:
    """(N, width) bool: True at each text's real positions."""
    return jnp.arange(width)[None, :] < lengths[:, None]


class PadEmbed(nn.Module):
    """An embedding whose padding id always maps to zeros, as torch's `padding_idx` does.

    The table keeps a row for the padding id (torch counts it among the parameters too), but
    its output is masked to zero, so that row neither affects the output nor gets a gradient.
    """

    vocab_size: int
    features: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        embedded = nn.Embed(self.vocab_size, self.features, dtype=self.dtype, name="table")(x)
        return embedded * (x != PAD_ID)[..., None].astype(embedded.dtype)
