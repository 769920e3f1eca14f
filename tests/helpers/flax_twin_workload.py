"""A user's workload that names a JAX twin of its PyTorch model, as docs/custom-workloads.md
shows: `trainscale run tests/helpers/flax_twin_workload.py:make_workload --framework jax`."""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from trainscale.workloads import JAX, Recipe, Workload, array_workload

HIDDEN = 16


def torch_mlp(meta: dict[str, Any]) -> nn.Module:
    return nn.Sequential(
        nn.Linear(meta["num_features"], HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, meta["num_classes"])
    )


def flax_mlp(meta: dict[str, Any]) -> Any:
    """The same MLP in flax, and the copy of the PyTorch weights into its variables."""
    import jax.numpy as jnp
    from flax import linen as fnn

    from trainscale.models.jax import FlaxTwin

    class Mlp(fnn.Module):
        classes: int
        dtype: Any = jnp.float32

        @fnn.compact
        def __call__(self, x: Any, train: bool = False) -> Any:
            x = fnn.relu(fnn.Dense(HIDDEN, dtype=self.dtype, name="hidden")(x))
            return fnn.Dense(self.classes, dtype=self.dtype, name="out")(x)

    def from_torch(model: nn.Module) -> dict[str, Any]:
        state = {key: value.detach().numpy().copy() for key, value in model.state_dict().items()}

        def dense(index: int) -> dict[str, np.ndarray]:
            return {"kernel": state[f"{index}.weight"].T, "bias": state[f"{index}.bias"]}

        return {"params": {"hidden": dense(0), "out": dense(2)}}

    return FlaxTwin(lambda dtype: Mlp(meta["num_classes"], dtype), from_torch)


def make_workload() -> Workload:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    return array_workload(
        name="flax-twin-mlp",
        description="a 4-16-2 MLP with a JAX twin",
        model=torch_mlp,
        train=(x[:384], y[:384]),
        test=(x[384:], y[384:]),
        recipe=Recipe(optimizer="sgd", lr=0.1, batch_size=32, epochs=1, schedule="constant"),
        target_accuracy=0.9,
        twins={JAX: flax_mlp},
    )
