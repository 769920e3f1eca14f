"""The deep belief network's unrolled classifier in flax.linen (twin of trainscale.models.dbn).

Each sigmoid layer is an RBM: `kernel` (visible x hidden) and `bias` (the hidden bias) are
trained parameters. The RBM's visible bias lives in the separate `"rbm"` variable collection,
as the torch model keeps it in a buffer: only CD pre-training
(trainscale.models.jax.dbn_pretrain) reads and changes it, so an optimizer given
`variables["params"]` carries no state for it, and the forward pass does not need it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import torch
from flax import linen as nn

from trainscale.models.jax.torch_weights import TorchState, Tree, count_modules

RBM_COLLECTION = "rbm"
"""The variable collection of the RBMs' visible biases (pre-training only)."""


def rbm_name(index: int) -> str:
    """The submodule name of the `index`-th RBM (0 = next to the input)."""
    return f"rbm_{index}"


class Rbm(nn.Module):
    """One Bernoulli-Bernoulli RBM as a sigmoid layer: p(h=1 | v) = sigmoid(v W + c)."""

    num_visible: int
    num_hidden: int
    init_std: float = 0.01
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, visible: jnp.ndarray) -> jnp.ndarray:
        kernel = self.param(
            "kernel", nn.initializers.normal(self.init_std), (self.num_visible, self.num_hidden)
        )
        bias = self.param("bias", nn.initializers.zeros, (self.num_hidden,))
        if self.is_initializing():
            # Declared only at init: applying the classifier needs no "rbm" collection.
            self.variable(RBM_COLLECTION, "visible_bias", jnp.zeros, (self.num_visible,))
        visible = visible.astype(self.dtype)
        return jax.nn.sigmoid(visible @ kernel.astype(self.dtype) + bias.astype(self.dtype))


class DeepBeliefNet(nn.Module):
    """RBMs stacked input-to-top, unrolled into sigmoid layers, plus a linear softmax head.

    Takes (N, num_inputs) (or any (N, ...) flattened to it); returns logits.
    """

    num_inputs: int
    hidden_sizes: Sequence[int]
    num_classes: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        del train  # no dropout nor batch norm: the same in both modes
        if not self.hidden_sizes:
            raise ValueError("a deep belief network needs at least one hidden layer")
        x = x.reshape(x.shape[0], -1)
        sizes = [self.num_inputs, *self.hidden_sizes]
        for index in range(len(self.hidden_sizes)):
            x = Rbm(sizes[index], sizes[index + 1], dtype=self.dtype, name=rbm_name(index))(x)
        return nn.Dense(self.num_classes, dtype=self.dtype, name="head")(x)


def from_torch(model: torch.nn.Module) -> Tree:
    """DeepBeliefNet: each RBM's weight (hidden x visible), hidden and visible bias; the head."""
    state = TorchState(model)
    params: Tree = {}
    visible: Tree = {}
    for index in range(count_modules(model, "rbms")):
        prefix = f"rbms.{index}"
        params[rbm_name(index)] = {
            "kernel": state.take(f"{prefix}.weight").T,
            "bias": state.take(f"{prefix}.hidden_bias"),
        }
        visible[rbm_name(index)] = {"visible_bias": state.take(f"{prefix}.visible_bias")}
    params["head"] = state.linear("head")
    state.done()
    return {"params": params, RBM_COLLECTION: visible}
