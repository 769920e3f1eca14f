"""Evaluation of a flax model on this rank's share of the test set: accuracy, mean loss and
macro-F1, the counts summed over the ranks on the torch bookkeeping channel.

Off the training clock (the loop times it apart). The forward pass is one jitted function
on this process's first device, in eval mode (dropout off, batch norm on its running
statistics). Batches are CPU_EVAL_BATCH rows, the last one padded to it and its padding
left out of the counts, so images compile the forward pass once; token batches are trimmed
to bucketed widths as in training (a few compilations, the first evaluation's).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import torch

from trainscale.frameworks.jax.inputs import (
    bucket_width,
    host_batch,
    is_token_set,
    longest_text,
)
from trainscale.frameworks.jax.step import JaxModel
from trainscale.parallel.strategy import Strategy
from trainscale.train.evaluate import CPU_EVAL_BATCH, GPU_EVAL_BATCH, macro_f1


class JaxEvaluator:
    """Scores a `JaxModel` on the rank's test shard (`strategy.eval_shard`)."""

    def __init__(self, test_x: torch.Tensor, test_y: torch.Tensor, strategy: Strategy) -> None:
        """`test_x` is the whole test set as the model takes it (NHWC images)."""
        part = strategy.eval_shard(test_x.shape[0])
        self.xs, self.ys = test_x[part], test_y[part].numpy()
        self.strategy = strategy
        self.batch = GPU_EVAL_BATCH if strategy.device.type == "cuda" else CPU_EVAL_BATCH
        self.full_width = test_x.shape[1] if is_token_set(test_x) else None
        self._logits: Any = None
        self._module: Any = None

    def _forward(self, module: Any):
        if module is not self._module:
            self._module = module
            self._logits = jax.jit(lambda variables, x: module.apply(variables, x, train=False))
        return self._logits

    def __call__(self, model: JaxModel) -> tuple[float, float, float]:
        """(accuracy, mean loss, macro-F1) over every rank's shard together."""
        forward = self._forward(model.module)
        totals = torch.zeros(3, dtype=torch.float64)  # correct, loss sum, count
        confusion: torch.Tensor | None = None
        for start in range(0, self.xs.shape[0], self.batch):
            x_torch = self.xs[start : start + self.batch]
            rows = x_torch.shape[0]
            width = None
            if self.full_width is not None:
                width = bucket_width(longest_text(x_torch), self.full_width)
            x = host_batch(x_torch, width)
            if rows < self.batch:  # pad to the compiled batch; padding rows are not counted
                x = np.concatenate([x, np.zeros((self.batch - rows, *x.shape[1:]), x.dtype)])
            logits = np.asarray(forward(model.variables, x), dtype=np.float64)[:rows]
            y = self.ys[start : start + rows]
            num_classes = logits.shape[1]
            predicted = logits.argmax(axis=1)
            shifted = logits - logits.max(axis=1, keepdims=True)
            log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
            totals[0] += float((predicted == y).sum())
            totals[1] += float(-log_probs[np.arange(rows), y].sum())
            totals[2] += rows
            counts = np.bincount(y * num_classes + predicted, minlength=num_classes**2)
            if confusion is None:
                confusion = torch.zeros(num_classes**2, dtype=torch.float64)
            confusion += torch.from_numpy(counts.astype(np.float64))
        assert confusion is not None  # every rank has test samples (eval_shard)
        self.strategy.sum_tensor(totals)
        self.strategy.sum_tensor(confusion)
        correct, loss_sum, count = totals.tolist()
        side = int(confusion.numel() ** 0.5)
        return correct / count, loss_sum / count, macro_f1(confusion.view(side, side))
