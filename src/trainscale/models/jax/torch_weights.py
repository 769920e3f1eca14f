"""What the flax twins' exact copies of the torch models' weights share.

Each architecture's module has a `from_torch(model)` that turns the torch model's state dict
into a nested dict of numpy arrays in flax's layout, with the `TorchState` here:
convolution kernels OIHW -> HWIO (1-D: OIW -> WIO), linear weights (out, in) -> kernels
(in, out), BatchNorm scale, bias and running statistics. A `TorchState` hands out the torch
tensors and checks that every one was taken, so a weight the copy forgot is an error rather
than a silently different model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

Tree = dict[str, Any]

# Counters, not weights: flax's BatchNorm keeps no step count (it uses a fixed momentum).
_NOT_COPIED = ("num_batches_tracked",)


class TorchState:
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


def count_modules(model: torch.nn.Module, name: str) -> int:
    """How many modules `model`'s list `name` (an nn.ModuleList) holds."""
    return len(list(model.get_submodule(name).children()))


def embedding_table(state: TorchState) -> Tree:
    """A text model's embedding table (the padding row included, as torch keeps it)."""
    return {"table": {"embedding": state.take("embedding.weight")}}
