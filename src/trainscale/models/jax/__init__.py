"""The flax.linen twins of the reference models, one module per architecture.

A workload names its twin beside its PyTorch model (`Workload.models["jax"]`, a builder
returning a `FlaxTwin`): the flax module for a computation dtype, and its module's
`from_torch`, which copies a PyTorch model's weights exactly (with `torch_weights.py`); that
is how a run starts from the same weights in every framework. `init_variables` initialises a
module with flax's own initialisers instead.

Every model is called as `module.apply(variables, x, train=...)`: image models take NHWC
float inputs, text models (N, T) int token ids with 0 = padding at the end. In training mode
dropout draws from the "dropout" rng and BatchNorm updates the "batch_stats" collection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from trainscale.models.jax.torch_weights import Tree
from trainscale.models.twin_pretraining import TwinPretraining


@dataclass(frozen=True)
class FlaxTwin:
    """What `--framework jax` trains for a workload: its flax module, built from the data's
    meta, and how the PyTorch model's weights become the module's variables."""

    module: Callable[[Any], nn.Module]
    """`module(dtype)`: the flax module computing in `dtype` (jnp.bfloat16 for mixed
    precision); parameters stay float32."""
    convert: Callable[[Any], Tree]
    """The PyTorch model's state as flax variables (its architecture's `from_torch`)."""
    pretrain: Callable[[Tree, TwinPretraining], tuple[Tree, dict[str, Any]]] | None = None
    """The workload's pre-training phase in JAX, `pretrain(variables, context)` returning
    the trained variables and the phase's figures; None: no such phase."""

    def variables_from_torch(self, module: nn.Module, torch_model: Any, sample_x: Any) -> Tree:
        """`module`'s variables holding exactly `torch_model`'s weights (and BN running stats).

        The copy is checked against the module's own variables for inputs like `sample_x`:
        the same collections, names and shapes, so a mismatch fails here, not as odd
        accuracy later.
        """
        return checked_variables(self.convert(torch_model), module, sample_x)


def init_variables(module: nn.Module, sample_x: Any, seed: int) -> dict[str, Any]:
    """Freshly initialised variables (flax's initialisers) for inputs shaped like `sample_x`."""
    params_key, dropout_key = jax.random.split(jax.random.PRNGKey(seed))
    variables = module.init({"params": params_key, "dropout": dropout_key}, sample_x, train=False)
    return dict(variables)


def checked_variables(converted: Tree, module: nn.Module, sample_x: Any) -> Tree:
    """`converted` as `module`'s variables, once checked against the module's own for inputs
    like `sample_x` (collections, names, shapes); ValueError naming what differs."""
    name = type(module).__name__
    expected = jax.eval_shape(
        lambda: module.init(
            {"params": jax.random.PRNGKey(0), "dropout": jax.random.PRNGKey(1)},
            sample_x,
            train=False,
        )
    )
    expected_paths = dict(jax.tree_util.tree_flatten_with_path(dict(expected))[0])
    converted_paths = dict(jax.tree_util.tree_flatten_with_path(converted)[0])
    if set(expected_paths) != set(converted_paths):
        names = sorted(
            jax.tree_util.keystr(path) for path in set(expected_paths) ^ set(converted_paths)
        )
        raise ValueError(f"torch weights do not match the JAX {name}: {names}")
    for path, leaf in expected_paths.items():
        shape = np.shape(converted_paths[path])
        if shape != leaf.shape:
            raise ValueError(
                f"{name}: {jax.tree_util.keystr(path)} has shape {shape} from torch, "
                f"{leaf.shape} in the JAX model"
            )
    # jnp.array copies: the variables own their memory.
    return jax.tree_util.tree_map(lambda a: jnp.array(a, jnp.float32), converted)
