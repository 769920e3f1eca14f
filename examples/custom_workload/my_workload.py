"""An example custom workload: your own model on your own numpy arrays.

    trainscale run examples/custom_workload/my_workload.py:make_workload
    trainscale run examples/custom_workload/my_workload.py:make_workload --workers 2
    trainscale bench --workload examples/custom_workload/my_workload.py:make_workload

trainscale imports this file in the command's process and again in every worker process, and
calls `make_workload()` in each: keep the import cheap and the data deterministic. Here the
"user's arrays" are a five-armed spiral drawn with a fixed seed; in your own file they would
come from `np.load("features.npy")` or a tensor you saved.
"""

from __future__ import annotations

import numpy as np
from torch import nn

from trainscale.workloads import Recipe, Workload, array_workload


class SpiralNet(nn.Module):
    """A small MLP classifier: the model you want to measure."""

    def __init__(self, num_features: int, num_classes: int, width: int = 256) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(num_features, width),
            nn.ReLU(),
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, num_classes),
        )

    def forward(self, x):
        return self.layers(x)


def spiral_arrays(samples: int, classes: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`samples` noisy points on `classes` spiral arms: (x float32 (N, 2), y int64 (N,))."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, samples)
    radius = rng.uniform(0.05, 1.0, samples)
    angle = y * (2 * np.pi / classes) + radius * 4.0 + rng.normal(0, 0.3, samples)
    x = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    return x.astype(np.float32), y.astype(np.int64)


def make_workload() -> Workload:
    """The spec trainscale trains: model builder, data, recipe and accuracy target."""
    train = spiral_arrays(20_000, seed=0)
    test = spiral_arrays(4_000, seed=1)
    return array_workload(
        name="spiral-mlp",
        description="A 2-256-256-5 MLP on five noisy spiral arms (numpy arrays)",
        # `meta` says what the data look like: num_classes, input_shape, num_features.
        model=lambda meta: SpiralNet(meta["num_features"], meta["num_classes"]),
        train=train,
        test=test,
        recipe=Recipe(optimizer="adam", lr=3e-3, batch_size=128, epochs=4, schedule="onecycle"),
        target_accuracy=0.93,
    )
