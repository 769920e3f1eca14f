"""The pieces every emulation mode shares: what the training loop is told about its steps,
one worker's forward/backward, model state snapshots, and parameter averaging."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.train.loop import StepRules
from trainscale.train.precision import autocast
from trainscale.workloads.base import Workload


def emulation_rules(samples_per_step: int) -> StepRules:
    """How every emulation mode's global step differs from a trainer's step in the loop:
    the emulated workers draw their own batches from their streams, and the step times are
    the emulating process's, kept only for its training clock (no step times are stored)."""
    return StepRules(samples_per_step=samples_per_step, draws_batches=False, keeps_step_times=False)


def backward_on(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    workload: Workload,
    config: RunConfig,
    scale: float = 1.0,
) -> torch.Tensor:
    """Forward and backward of one worker's batch, adding `scale` x its gradient into the
    parameters' `.grad`; returns the (unscaled) loss, detached."""
    device = x.device
    with autocast(device, config.optimisation.precision):
        loss = workload.loss(model(x), y, config.optimisation.label_smoothing)
    (loss * scale if scale != 1.0 else loss).backward()
    return loss.detach().float()


def float_buffers(model: nn.Module) -> list[torch.Tensor]:
    """The model's floating-point buffers (batch-norm running statistics)."""
    return [b for b in model.buffers() if b.is_floating_point()]


def snapshot_buffers(model: nn.Module) -> list[torch.Tensor]:
    """Copies of every buffer, to put back with `restore_buffers`."""
    return [b.detach().clone() for b in model.buffers()]


def restore_buffers(model: nn.Module, saved: Sequence[torch.Tensor]) -> None:
    with torch.no_grad():
        for buffer, value in zip(model.buffers(), saved, strict=True):
            buffer.copy_(value)


@torch.no_grad()
def average_into(target: nn.Module, replicas: Sequence[nn.Module]) -> None:
    """Set `target`'s parameters and floating-point buffers to the replicas' mean.

    `target` may be one of the replicas. Integer buffers (batch-norm step counters) are
    equal across replicas that step together, and are left alone.
    """
    pairs: list[tuple[list[torch.Tensor], list[list[torch.Tensor]]]] = [
        (list(target.parameters()), [list(r.parameters()) for r in replicas]),
        (float_buffers(target), [float_buffers(r) for r in replicas]),
    ]
    for mine, theirs in pairs:
        for index, tensor in enumerate(mine):
            mean = torch.stack([tensors[index] for tensors in theirs]).mean(dim=0)
            tensor.copy_(mean)
