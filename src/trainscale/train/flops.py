"""Training FLOPs per sample, counted once per run (off the clock) by torch's counter."""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from trainscale.data.tensors import TensorData
from trainscale.metrics.flops import FlopCount, extra_flop_formulas, split_by_kind
from trainscale.train.warmup import untouched
from trainscale.workloads.base import Workload


def count_flops(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, workload: Workload
) -> FlopCount | None:
    """Training FLOPs (forward + backward) per sample, in all and by operator kind
    (`metrics.flops.FLOP_KINDS`), counted by torch.utils.flop_counter.

    The counter covers matrix multiplications and convolutions, the ops that dominate these
    models; elementwise work is not counted. None where counting is not supported. The
    fused CPU LSTM kernel, which the counter does not know, is counted by the formulas in
    `metrics/flops.py`, the same way the counter counts a decomposed LSTM.

    The count leaves no trace: the model's buffers (batch-norm running statistics and step
    counters), its gradients and the random number generators (dropout draws) are as they
    were, so training starts from the state it would have had without the count.
    """
    try:
        with untouched(model, x.device):
            counter = FlopCounterMode(display=False, custom_mapping=extra_flop_formulas())
            with counter:
                workload.loss(model(x), y).backward()
        return split_by_kind(counter.get_flop_counts()["Global"], x.shape[0])
    except Exception:  # an op the counter cannot trace must not fail the run
        return None


def count_flops_per_sample(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, workload: Workload
) -> int | None:
    """Training FLOPs (forward + backward) per sample, as `count_flops` counts them."""
    counted = count_flops(model, x, y, workload)
    return None if counted is None else counted.per_sample


def flops_batch(
    workload: Workload, data: TensorData, train_x: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (x, y) FLOPs per sample are counted on: the workload's own choice, else the first
    two training samples (of `train_x`, the inputs in the model's memory format, if given)."""
    if workload.flops_batch is not None:
        return workload.flops_batch(data)
    inputs = data.train_x if train_x is None else train_x
    return inputs[:2], data.train_y[:2]


def seeded_torch_model(
    workload: Workload, data: TensorData, seed: int
) -> tuple[torch.nn.Module, FlopCount | None]:
    """The workload's PyTorch model built from `seed`, and its training FLOPs per sample:
    what another framework's trainer copies its initial weights from and counts on."""
    torch.manual_seed(seed)
    model = workload.build_model(data.meta)
    return model, count_flops(model, *flops_batch(workload, data), workload)
