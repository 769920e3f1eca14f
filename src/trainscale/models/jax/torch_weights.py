"""Exact copies of the torch reference models' weights into the flax twins' variables.

One function per architecture turns a torch model's state dict into a nested dict of numpy
arrays in flax's layout: convolution kernels OIHW -> HWIO (1-D: OIW -> WIO), linear weights
(out, in) -> kernels (in, out), recurrent weights per direction with torch's gate order
(which the JAX cells keep), BatchNorm scale, bias and running statistics. A `_State` hands
out the torch tensors and checks that every one was taken, so a weight the copy forgot is
an error rather than a silently different model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from trainscale.models.jax.dbn import RBM_COLLECTION, rbm_name

Tree = dict[str, Any]

# Counters, not weights: flax's BatchNorm keeps no step count (it uses a fixed momentum).
_NOT_COPIED = ("num_batches_tracked",)


class _State:
    """A torch state dict as float32 numpy arrays, each to be taken exactly once."""

    def __init__(self, model: torch.nn.Module) -> None:
        # Copies: jax arrays made from numpy on the CPU may share its memory, and a torch
        # tensor's numpy view shares the tensor's, so the torch model training on would
        # otherwise change the "immutable" jax weights under the JAX model.
        self._left = {
            key: value.detach().cpu().to(torch.float32).numpy().copy()
            for key, value in model.state_dict().items()
            if not key.endswith(_NOT_COPIED)
        }

    def take(self, key: str) -> np.ndarray:
        return self._left.pop(key)

    def linear(self, prefix: str) -> Tree:
        return {"kernel": self.take(f"{prefix}.weight").T, "bias": self.take(f"{prefix}.bias")}

    def conv(self, prefix: str, bias: bool = True) -> Tree:
        weight = self.take(f"{prefix}.weight")
        # OIHW -> HWIO (and OIW -> WIO): spatial axes first, then in, then out.
        kernel = np.transpose(weight, (*range(2, weight.ndim), 1, 0))
        return (
            {"kernel": kernel, "bias": self.take(f"{prefix}.bias")} if bias else {"kernel": kernel}
        )

    def batch_norm(self, prefix: str) -> tuple[Tree, Tree]:
        params = {"scale": self.take(f"{prefix}.weight"), "bias": self.take(f"{prefix}.bias")}
        stats = {
            "mean": self.take(f"{prefix}.running_mean"),
            "var": self.take(f"{prefix}.running_var"),
        }
        return params, stats

    def done(self) -> None:
        if self._left:
            raise ValueError(f"torch weights not copied: {', '.join(sorted(self._left))}")


def _count(model: torch.nn.Module, name: str) -> int:
    """How many modules `model`'s list `name` (an nn.ModuleList) holds."""
    return len(list(model.get_submodule(name).children()))


def mnist_cnn(model: torch.nn.Module) -> Tree:
    """MnistCnn: features.0/2 convolutions, classifier.1/4 dense layers."""
    state = _State(model)
    fc1 = state.linear("classifier.1")
    # torch flattens the pooled maps as (C, H, W), flax as (H, W, C): permute the rows.
    channels, height, width = 64, 12, 12
    kernel = fc1["kernel"].reshape(channels, height, width, -1)
    fc1["kernel"] = kernel.transpose(1, 2, 0, 3).reshape(channels * height * width, -1)
    params = {
        "conv1": state.conv("features.0"),
        "conv2": state.conv("features.2"),
        "fc1": fc1,
        "fc2": state.linear("classifier.4"),
    }
    state.done()
    return {"params": params}


def dbn(model: torch.nn.Module) -> Tree:
    """DeepBeliefNet: each RBM's weight (hidden x visible), hidden and visible bias; the head."""
    state = _State(model)
    params: Tree = {}
    visible: Tree = {}
    for index in range(_count(model, "rbms")):
        prefix = f"rbms.{index}"
        params[rbm_name(index)] = {
            "kernel": state.take(f"{prefix}.weight").T,
            "bias": state.take(f"{prefix}.hidden_bias"),
        }
        visible[rbm_name(index)] = {"visible_bias": state.take(f"{prefix}.visible_bias")}
    params["head"] = state.linear("head")
    state.done()
    return {"params": params, RBM_COLLECTION: visible}


def resnet_cifar(model: torch.nn.Module) -> Tree:
    """ResNetCifar: stem convolution and BN, every block's two convolutions and BNs, fc."""
    state = _State(model)
    params: Tree = {"conv": state.conv("conv", bias=False)}
    stats: Tree = {}
    params["bn"], stats["bn"] = state.batch_norm("bn")
    for index in range(_count(model, "blocks")):
        prefix = f"blocks.{index}"
        block_params: Tree = {}
        block_stats: Tree = {}
        for layer in ("1", "2"):
            block_params[f"conv{layer}"] = state.conv(f"{prefix}.conv{layer}", bias=False)
            block_params[f"bn{layer}"], block_stats[f"bn{layer}"] = state.batch_norm(
                f"{prefix}.bn{layer}"
            )
        params[f"block_{index}"], stats[f"block_{index}"] = block_params, block_stats
    params["fc"] = state.linear("fc")
    state.done()
    return {"params": params, "batch_stats": stats}


def _embedding(state: _State) -> Tree:
    return {"table": {"embedding": state.take("embedding.weight")}}


def text_rnn(model: torch.nn.Module) -> Tree:
    """TextRNN: embedding, both directions of the 1-layer LSTM/GRU, classifier.

    torch's W_ih (G*H, E) and W_hh (G*H, H) hold the gates stacked in its order (LSTM i, f,
    g, o; GRU r, z, n); the JAX cells split their projections in the same order, so the copy
    is a transpose per matrix, with both biases kept apart as torch keeps them.
    """
    state = _State(model)
    params: Tree = {"embedding": _embedding(state)}
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


def text_cnn(model: torch.nn.Module) -> Tree:
    """TextCNN: embedding, the 1-D convolutions (OIW -> WIO), classifier."""
    state = _State(model)
    params: Tree = {"embedding": _embedding(state)}
    for index in range(_count(model, "convs")):
        params[f"conv_{index}"] = state.conv(f"convs.{index}")
    params["classifier"] = state.linear("classifier")
    state.done()
    return {"params": params}


CONVERTERS: dict[str, Callable[[torch.nn.Module], Tree]] = {
    "mnist_cnn": mnist_cnn,
    "dbn": dbn,
    "resnet_cifar": resnet_cifar,
    "text_rnn": text_rnn,
    "text_cnn": text_cnn,
}
