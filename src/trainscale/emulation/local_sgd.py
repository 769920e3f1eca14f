"""Local SGD (periodic model averaging) of N workers, emulated with N replicas in one process.

Every replica starts from the same parameters and trains on its own shard with its own
optimizer; after every H local steps the replicas' parameters (and floating-point buffers,
such as batch-norm statistics) are replaced by their mean. Optimizer state (momentum, Adam's
moments) stays local and is never averaged, as in Stich 2019 and Lin et al. 2020: averaging
it would be extra communication that local SGD exists to avoid.

One global step is one local step of every replica (N x b samples). With H = 1 and an
optimizer whose update is linear in the gradient (SGD, with or without momentum), the mean
of the replicas' updates is the update of the mean gradient: sync SGD exactly.

Evaluation between two averagings scores the replicas' mean without changing the replicas
(what an averaging at that point would produce); training ends with a last averaging.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.emulation.gradient import average_into, backward_on, emulation_rules
from trainscale.emulation.streams import WorkerStream
from trainscale.train.loop import StepInput
from trainscale.train.lr import make_optimisation
from trainscale.workloads.base import Workload


class LocalSGD:
    """N replicas, H local steps, then parameter averaging."""

    def __init__(
        self,
        model: nn.Module,
        streams: list[WorkerStream],
        workload: Workload,
        config: RunConfig,
        total_steps: int,
        local_steps: int,
    ) -> None:
        self.streams = streams
        self.workload = workload
        self.config = config
        self.local_steps = local_steps
        self.rules = emulation_rules(len(streams) * config.optimisation.batch_size)
        """A global step: one local step of every replica, N x b samples."""
        self.replicas = [model] + [copy.deepcopy(model) for _ in streams[1:]]
        self.optimizers = []
        self.schedulers = []
        for replica in self.replicas:
            optimizer, scheduler = make_optimisation(replica, config, total_steps)
            self.optimizers.append(optimizer)
            self.schedulers.append(scheduler)
        self.steps_taken = 0
        self.averagings = 0
        self._scratch: nn.Module | None = None

    @property
    def in_sync(self) -> bool:
        """Whether the replicas are equal (just averaged, or not yet trained)."""
        return len(self.replicas) == 1 or self.steps_taken % self.local_steps == 0

    def average(self) -> None:
        """Replace every replica's parameters by the replicas' mean (one replica has nothing
        to average with: no averaging happens, and none is counted)."""
        if len(self.replicas) == 1:
            return
        mean = self._mean_model()
        for replica in self.replicas:
            average_into(replica, [mean])
        self.averagings += 1

    def _mean_model(self) -> nn.Module:
        if self._scratch is None:
            self._scratch = copy.deepcopy(self.replicas[0])
        average_into(self._scratch, self.replicas)
        return self._scratch

    def step(self, given: StepInput | None = None) -> torch.Tensor:
        """One local step of every replica (then an averaging every H steps); `given` is not
        needed: the replicas draw their own batches."""
        losses = []
        for replica, stream, optimizer, scheduler in zip(
            self.replicas, self.streams, self.optimizers, self.schedulers, strict=True
        ):
            optimizer.zero_grad(set_to_none=True)
            x, y = stream.next_batch()
            losses.append(backward_on(replica, x, y, self.workload, self.config))
            optimizer.step()
            scheduler.step()
        self.steps_taken += 1
        if self.steps_taken % self.local_steps == 0:
            self.average()
        return torch.stack(losses).mean()

    def eval_model(self) -> nn.Module:
        return self.replicas[0] if self.in_sync else self._mean_model()

    def finish(self) -> nn.Module:
        if not self.in_sync:
            self.average()
        return self.replicas[0]

    def figures(self) -> dict[str, Any]:
        return {"averagings": self.averagings}
