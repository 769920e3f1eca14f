"""Synchronous data parallelism (DDP) of N workers, emulated by one model.

One global step: every worker's batch is forwarded and back-propagated on the one model,
each gradient scaled by 1/N and accumulated, then one optimizer step. That is DDP's update:
the all-reduce averages the N workers' mean-loss gradients. Each worker's batch goes
through the model on its own (not as one batch of N*b), so batch-dependent layers
(batch norm) see per-worker batches as they do under DDP.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.emulation.gradient import (
    backward_on,
    emulation_rules,
    restore_buffers,
    snapshot_buffers,
)
from trainscale.emulation.streams import WorkerStream
from trainscale.train.loop import StepInput
from trainscale.train.lr import make_optimisation
from trainscale.workloads.base import Workload


class SyncSGD:
    """N workers, one update per global batch of N x b samples."""

    def __init__(
        self,
        model: nn.Module,
        streams: list[WorkerStream],
        workload: Workload,
        config: RunConfig,
        total_steps: int,
    ) -> None:
        self.model = model
        self.streams = streams
        self.workload = workload
        self.config = config
        self.rules = emulation_rules(len(streams) * config.optimisation.batch_size)
        """A global step: N x b samples."""
        self.optimizer, self.scheduler = make_optimisation(model, config, total_steps)
        self.has_buffers = any(True for _ in model.buffers())

    def step(self, given: StepInput | None = None) -> torch.Tensor:
        """One global step (the workers draw their own batches: `given` is not needed);
        returns the mean of the workers' losses."""
        self.optimizer.zero_grad(set_to_none=True)
        scale = 1.0 / len(self.streams)
        saved = snapshot_buffers(self.model) if self.has_buffers else None
        losses = []
        # Rank 0 last, from the buffers as they were: DDP broadcasts rank 0's buffers before
        # every forward, so the run keeps rank 0's batch-norm statistics. Gradients do not
        # depend on running statistics in training mode, so the order changes nothing else.
        for stream in [*self.streams[1:], self.streams[0]]:
            if stream.rank == 0 and saved is not None:
                restore_buffers(self.model, saved)
            x, y = stream.next_batch()
            losses.append(backward_on(self.model, x, y, self.workload, self.config, scale))
        self.optimizer.step()
        self.scheduler.step()
        return torch.stack(losses).mean()

    def eval_model(self) -> nn.Module:
        return self.model

    def finish(self) -> nn.Module:
        return self.model

    def figures(self) -> dict[str, Any]:
        return {}
