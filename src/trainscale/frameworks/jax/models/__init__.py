"""The flax.linen twins of the reference models, by workload name.

`build_model(workload, meta)` builds the architecture from the same data meta as the torch
builders in trainscale.workloads; `init_variables` initialises it with flax's own
initialisers; `variables_from_torch` copies a torch model's weights exactly (see
torch_weights.py), which is how a run starts from the same weights in every framework.

Every model is called as `module.apply(variables, x, train=...)`: image models take NHWC
float inputs, text models (N, T) int token ids with 0 = padding at the end. In training mode
dropout draws from the "dropout" rng and BatchNorm updates the "batch_stats" collection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from trainscale.errors import ConfigError
from trainscale.frameworks.jax.models import torch_weights
from trainscale.frameworks.jax.models.dbn import DeepBeliefNet
from trainscale.frameworks.jax.models.mnist_cnn import MnistCnn
from trainscale.frameworks.jax.models.resnet_cifar import ResNetCifar
from trainscale.frameworks.jax.models.text_cnn import TextCNN
from trainscale.frameworks.jax.models.text_rnn import TextRNN

RESNET_DEPTH = 44  # cifar10-resnet44: 6n+2 with n = 7
DBN_LAYERS = (500, 500, 2000)  # trainscale.workloads.mnist_dbn's default


@dataclass(frozen=True)
class _Twin:
    build: Callable[[Mapping[str, Any], Any], nn.Module]
    architecture: str  # the key of its converter in torch_weights.CONVERTERS


_TWINS: dict[str, _Twin] = {
    "mnist-cnn": _Twin(
        lambda meta, dtype: MnistCnn(num_classes=meta.get("num_classes", 10), dtype=dtype),
        "mnist_cnn",
    ),
    "mnist-dbn": _Twin(
        lambda meta, dtype: DeepBeliefNet(
            num_inputs=meta.get("num_inputs", 28 * 28),
            hidden_sizes=tuple(meta.get("layers", DBN_LAYERS)),
            num_classes=meta.get("num_classes", 10),
            dtype=dtype,
        ),
        "dbn",
    ),
    "imdb-bilstm": _Twin(
        lambda meta, dtype: TextRNN(meta["vocab_size"], meta["num_classes"], "lstm", dtype=dtype),
        "text_rnn",
    ),
    "imdb-bigru": _Twin(
        lambda meta, dtype: TextRNN(meta["vocab_size"], meta["num_classes"], "gru", dtype=dtype),
        "text_rnn",
    ),
    "cifar10-resnet44": _Twin(
        lambda meta, dtype: ResNetCifar(
            (RESNET_DEPTH - 2) // 6, num_classes=meta.get("num_classes", 10), dtype=dtype
        ),
        "resnet_cifar",
    ),
    "tweets-text": _Twin(
        lambda meta, dtype: TextCNN(meta["vocab_size"], meta["num_classes"], dtype=dtype),
        "text_cnn",
    ),
}


def workload_names() -> list[str]:
    """The workloads that have a JAX model, sorted."""
    return sorted(_TWINS)


def _twin(workload_name: str) -> _Twin:
    try:
        return _TWINS[workload_name]
    except KeyError:
        raise ConfigError(
            f"workload {workload_name!r} has no JAX model (those with one: "
            f"{', '.join(workload_names())})"
        ) from None


def build_model(workload_name: str, meta: Mapping[str, Any], dtype: Any = jnp.float32) -> nn.Module:
    """The flax module of `workload_name` for the data's `meta` (num_classes, vocab_size, ...).

    `dtype` is the computation's (jnp.bfloat16 for mixed precision); parameters stay float32.
    """
    return _twin(workload_name).build(meta, dtype)


def init_variables(module: nn.Module, sample_x: Any, seed: int) -> dict[str, Any]:
    """Freshly initialised variables (flax's initialisers) for inputs shaped like `sample_x`."""
    params_key, dropout_key = jax.random.split(jax.random.PRNGKey(seed))
    variables = module.init({"params": params_key, "dropout": dropout_key}, sample_x, train=False)
    return dict(variables)


def variables_from_torch(
    workload_name: str, module: nn.Module, torch_model: Any, sample_x: Any
) -> dict[str, Any]:
    """`module`'s variables holding exactly `torch_model`'s weights (and BN running stats).

    The copy is checked against the module's own variables for inputs like `sample_x`: the
    same collections, names and shapes, so a mismatch fails here, not as odd accuracy later.
    """
    converted = torch_weights.CONVERTERS[_twin(workload_name).architecture](torch_model)
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
        raise ValueError(f"torch weights do not match the {workload_name} JAX model: {names}")
    for path, leaf in expected_paths.items():
        shape = np.shape(converted_paths[path])
        if shape != leaf.shape:
            raise ValueError(
                f"{workload_name}: {jax.tree_util.keystr(path)} has shape {shape} from torch, "
                f"{leaf.shape} in the JAX model"
            )
    # jnp.array copies: the variables own their memory.
    return jax.tree_util.tree_map(lambda a: jnp.array(a, jnp.float32), converted)
