"""Keras 3 twins of the reference models, one module per architecture.

Each module's `build(...)` makes the Keras model (weights created) and its
`copy_torch_weights(torch_model, keras_model)` copies every weight and BatchNorm statistic
of the PyTorch model into it, so that a run in TensorFlow starts from the very weights of
the seeded PyTorch model. A workload names its twin beside its PyTorch model
(`Workload.models["tensorflow"]`, a builder returning a `KerasTwin`). Image models take
NHWC input; text models take (N, T) int token ids, 0 = padding at the end.

Nothing here imports TensorFlow: a workload's builder imports its architecture's module
when a TensorFlow run builds the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainscale.models.twin_pretraining import TwinPretraining


@dataclass(frozen=True)
class KerasTwin:
    """What `--framework tensorflow` trains for a workload: its Keras model, built from the
    data's meta, and how the PyTorch model's weights are copied into it."""

    model: Any
    """The keras.Model, its weights created (under the distribution strategy's scope when
    the builder was called there)."""
    copy_torch_weights: Callable[[Any, Any], None]
    """`copy_torch_weights(torch_model, keras_model)`: every weight copied exactly; raises
    when the two architectures do not match."""
    pretrain: Callable[[Any, TwinPretraining], dict[str, Any]] | None = None
    """The workload's pre-training phase in TensorFlow, `pretrain(keras_model, context)`
    training the model in place and returning the phase's figures; None: no such phase."""

    def load_torch_weights(self, torch_model: Any) -> None:
        """Give the Keras model exactly the PyTorch model's weights."""
        self.copy_torch_weights(torch_model, self.model)
