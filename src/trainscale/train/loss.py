"""The loss a training step computes: the workload's, with the run's label smoothing."""

from __future__ import annotations

from collections.abc import Callable

import torch

from trainscale.workloads.base import Workload

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""(logits, targets) -> the mean loss over the batch."""


def run_loss(workload: Workload, label_smoothing: float = 0.0) -> LossFn:
    """`workload`'s loss with the run's label smoothing bound: the one function the step,
    its warm-up passes and `--compile` share (compilation compiles this function)."""

    def loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return workload.loss(logits, target, label_smoothing)

    return loss
