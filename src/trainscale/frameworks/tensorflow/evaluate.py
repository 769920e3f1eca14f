"""Evaluation of a Keras model on this rank's share of the test set: accuracy, mean loss
and macro-F1, the counts summed over the ranks through trainscale's bookkeeping channel.

Off the training clock (the loop times it apart). The same figures as PyTorch's
evaluation (train/evaluate.py): plain cross-entropy (no label smoothing), the same batch
size, the same macro-F1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from trainscale.data.tensors import TensorData
from trainscale.frameworks.tensorflow.inputs import is_image
from trainscale.parallel.strategy import Strategy
from trainscale.train.evaluate import CPU_EVAL_BATCH, macro_f1


def eval_inputs(data: TensorData, strategy: Strategy) -> tuple[np.ndarray, np.ndarray]:
    """This rank's test inputs as the model takes them (NHWC images, converted once) and
    their labels."""
    part = strategy.eval_shard(data.num_test)
    x = data.test_x[part]
    if is_image(x):
        x = x.permute(0, 2, 3, 1)
    return np.ascontiguousarray(x.numpy()), data.test_y[part].numpy()


def make_evaluator(
    data: TensorData, strategy: Strategy, signature: Any
) -> Callable[[Any], tuple[float, float, float]]:
    """The loop's evaluator: (accuracy, mean loss, macro-F1) of a Keras model on the test
    set, ranks splitting it; `signature` is the model input's tf.TensorSpec."""
    import tensorflow as tf

    xs, ys = eval_inputs(data, strategy)
    functions: dict[int, Any] = {}

    def logits_of(model: Any) -> Any:
        # One traced function per model (the loop evaluates the same model every time).
        key = id(model)
        if key not in functions:
            functions[key] = tf.function(
                lambda x: tf.cast(model(x, training=False), tf.float32),
                input_signature=[signature],
            )
        return functions[key]

    def evaluate(model: Any) -> tuple[float, float, float]:
        forward = logits_of(model)
        totals = torch.zeros(3, dtype=torch.float64)  # correct, loss sum, count
        confusion: torch.Tensor | None = None
        for start in range(0, len(xs), CPU_EVAL_BATCH):
            y = ys[start : start + CPU_EVAL_BATCH]
            logits = forward(xs[start : start + CPU_EVAL_BATCH])
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits).numpy()
            predicted = np.argmax(logits.numpy(), axis=1)
            classes = int(logits.shape[1])
            if confusion is None:
                confusion = torch.zeros(classes * classes, dtype=torch.float64)
            counts = np.bincount(y * classes + predicted, minlength=classes * classes)
            confusion += torch.from_numpy(counts).double()
            totals += torch.tensor(
                [float((predicted == y).sum()), float(losses.sum()), float(len(y))],
                dtype=torch.float64,
            )
        assert confusion is not None  # every rank holds test samples (sets >> ranks)
        strategy.sum_tensor(totals)
        strategy.sum_tensor(confusion)
        correct, loss_sum, count = totals.tolist()
        side = int(confusion.numel() ** 0.5)
        return correct / count, loss_sum / count, macro_f1(confusion.view(side, side))

    return evaluate
