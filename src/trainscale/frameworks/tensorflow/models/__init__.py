"""Keras 3 twins of the reference models, one module per architecture.

`build_model(workload, meta)` builds the Keras model of a workload from the same data meta
as the torch builders (`trainscale.workloads`), with its weights created; and
`load_torch_weights(workload, torch_model, model)` copies every weight and BatchNorm
statistic of the workload's torch model into it, so that a run in TensorFlow starts from
the very weights of the seeded torch model. Image models take NHWC input; text models take
(N, T) int token ids, 0 = padding at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trainscale.errors import ConfigError


def _mnist_cnn(meta: Mapping[str, Any]) -> Any:
    from trainscale.frameworks.tensorflow.models import mnist_cnn

    return mnist_cnn.build(num_classes=meta.get("num_classes", 10))


def _mnist_dbn(meta: Mapping[str, Any]) -> Any:
    from trainscale.frameworks.tensorflow.models import dbn
    from trainscale.workloads.mnist_dbn import NUM_CLASSES, NUM_PIXELS, DbnOptions

    # The same defaults as the torch builder: the layer sizes come from the run's options
    # through the data meta.
    return dbn.build(
        meta.get("num_inputs", NUM_PIXELS),
        tuple(meta.get("layers", DbnOptions().layers)),
        meta.get("num_classes", NUM_CLASSES),
    )


def _text_rnn(cell: str) -> Callable[[Mapping[str, Any]], Any]:
    def build(meta: Mapping[str, Any]) -> Any:
        from trainscale.frameworks.tensorflow.models import text_rnn

        return text_rnn.build(meta["vocab_size"], meta["num_classes"], cell=cell)

    return build


def _resnet44(meta: Mapping[str, Any]) -> Any:
    from trainscale.frameworks.tensorflow.models import resnet_cifar
    from trainscale.workloads.cifar10_resnet44 import DEPTH

    return resnet_cifar.build(DEPTH, num_classes=meta.get("num_classes", 10))


def _text_cnn(meta: Mapping[str, Any]) -> Any:
    from trainscale.frameworks.tensorflow.models import text_cnn

    return text_cnn.build(meta["vocab_size"], meta["num_classes"])


BUILDERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "mnist-cnn": _mnist_cnn,
    "mnist-dbn": _mnist_dbn,
    "imdb-bilstm": _text_rnn("lstm"),
    "imdb-bigru": _text_rnn("gru"),
    "cifar10-resnet44": _resnet44,
    "tweets-text": _text_cnn,
}

# The module of each workload's architecture (its `copy_torch_weights`).
ARCHITECTURES = {
    "mnist-cnn": "mnist_cnn",
    "mnist-dbn": "dbn",
    "imdb-bilstm": "text_rnn",
    "imdb-bigru": "text_rnn",
    "cifar10-resnet44": "resnet_cifar",
    "tweets-text": "text_cnn",
}


def _check(workload_name: str) -> None:
    if workload_name not in BUILDERS:
        raise ConfigError(
            f"workload {workload_name!r} has no TensorFlow model (there is one for "
            f"{', '.join(sorted(BUILDERS))})"
        )


def build_model(workload_name: str, meta: Mapping[str, Any]) -> Any:
    """The Keras model of `workload_name`, built (weights created) for the data's meta."""
    _check(workload_name)
    return BUILDERS[workload_name](meta)


def load_torch_weights(workload_name: str, torch_model: Any, keras_model: Any) -> None:
    """Copy every weight (and BatchNorm running statistic) of the torch model exactly."""
    import importlib

    _check(workload_name)
    module = importlib.import_module(
        f"trainscale.frameworks.tensorflow.models.{ARCHITECTURES[workload_name]}"
    )
    module.copy_torch_weights(torch_model, keras_model)
