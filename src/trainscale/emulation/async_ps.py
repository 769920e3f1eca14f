"""Asynchronous parameter-server SGD of N workers, emulated as a discrete-event simulation.

Each worker reads the server's parameters, computes a gradient on its next batch, which
takes a random compute time (lognormal with mean 1 and sigma `spread`, seeded), and sends
it; the server applies gradients in order of arrival, one optimizer step each. A
gradient's staleness is the number of updates the server applied between its worker's read
and its arrival. The worker then reads the new parameters and starts again.

Why gradients are computed at read time: a gradient depends only on the parameters read
and the batch, so computing it at the read and holding it until its arrival gives exactly
the gradient a worker would deliver, without keeping up to N old parameter versions and
re-running them later. The cost is one held gradient per worker (N x the parameters, the
same memory the versions would take) and one forward/backward per update, as in serial
training.

With N = 1 every gradient has staleness 0 and this is plain SGD. With equal compute times
(spread 0) every gradient after the first round has staleness N-1. With any spread, the
mean staleness over a long run tends to N-1: N gradients are always in flight, and each
update ages the N-1 others by one. The spread shapes the tail (the maximum).
"""

from __future__ import annotations

import heapq
import random
from typing import Any

import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.emulation.gradient import backward_on, emulation_rules
from trainscale.emulation.streams import WorkerStream
from trainscale.metrics import stats
from trainscale.train.loop import StepInput
from trainscale.train.lr import make_optimisation
from trainscale.workloads.base import Workload


def compute_time(rng: random.Random, spread: float) -> float:
    """One gradient's compute time: lognormal with mean 1 and sigma `spread` (1 if 0)."""
    if spread == 0:
        return 1.0
    # mu = -sigma^2 / 2 makes the mean exp(mu + sigma^2 / 2) = 1.
    return rng.lognormvariate(-spread * spread / 2, spread)


def staleness_figures(values: list[int]) -> dict[str, Any] | None:
    """Mean, max and percentiles of the applied gradients' staleness."""
    if not values:
        return None
    return {
        "mean": sum(values) / len(values),
        "max": max(values),
        "p50": stats.percentile(values, 50),
        "p90": stats.percentile(values, 90),
        "num_updates": len(values),
    }


class AsyncParameterServer:
    """A server model and N workers whose gradients arrive in event order."""

    def __init__(
        self,
        model: nn.Module,
        streams: list[WorkerStream],
        workload: Workload,
        config: RunConfig,
        total_steps: int,
        spread: float,
        staleness_aware_lr: bool = False,
    ) -> None:
        self.model = model
        self.streams = streams
        self.workload = workload
        self.config = config
        self.total_steps = total_steps
        self.spread = spread
        self.staleness_aware_lr = staleness_aware_lr
        self.rules = emulation_rules(config.optimisation.batch_size)
        """A global step: one worker's gradient applied, b samples."""
        self.optimizer, self.scheduler = make_optimisation(model, config, total_steps)
        self.params = [p for p in model.parameters()]
        # Its own seeded generator: the draw of compute times does not disturb torch's RNG
        # (dropout), and depends only on the seed.
        self.rng = random.Random(config.optimisation.seed)
        self.version = 0
        """Updates applied so far: the parameters' version."""
        self.staleness: list[int] = []
        self._read_version = [0] * len(streams)
        self._pending: list[list[torch.Tensor | None] | None] = [None] * len(streams)
        self._pending_loss: list[torch.Tensor | None] = [None] * len(streams)
        self._arrivals: list[tuple[float, int]] = []
        for worker in range(len(streams)):
            self._read_and_compute(worker, 0.0)

    def _read_and_compute(self, worker: int, now: float) -> None:
        """`worker` reads the current parameters and computes its next gradient."""
        self._read_version[worker] = self.version
        self.model.zero_grad(set_to_none=True)
        x, y = self.streams[worker].next_batch()
        self._pending_loss[worker] = backward_on(self.model, x, y, self.workload, self.config)
        # Taken over (not copied): zero_grad(set_to_none) hands the next backward new tensors.
        self._pending[worker] = [p.grad for p in self.params]
        self.model.zero_grad(set_to_none=True)
        # Ties (equal compute times) go to the lower worker index: a fixed, seeded order.
        heapq.heappush(self._arrivals, (now + compute_time(self.rng, self.spread), worker))

    def step(self, given: StepInput | None = None) -> torch.Tensor:
        """Apply the next gradient to arrive (`given` is not needed: the workers draw their
        own batches); returns the loss its worker computed."""
        now, worker = heapq.heappop(self._arrivals)
        staleness = self.version - self._read_version[worker]
        self.staleness.append(staleness)
        pending, loss = self._pending[worker], self._pending_loss[worker]
        # Every worker but the one being applied has computed its next gradient.
        assert pending is not None and loss is not None
        for param, grad in zip(self.params, pending, strict=True):
            param.grad = grad
        self._pending[worker] = None
        if self.staleness_aware_lr and staleness > 1:
            # Zhang et al. 2016: divide the lr by the staleness. The schedule sets every
            # step's lr afresh, so the division lasts this one update.
            scheduled = [group["lr"] for group in self.optimizer.param_groups]
            for group in self.optimizer.param_groups:
                group["lr"] = group["lr"] / staleness
            self.optimizer.step()
            for group, lr in zip(self.optimizer.param_groups, scheduled, strict=True):
                group["lr"] = lr
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.model.zero_grad(set_to_none=True)
        self.version += 1
        if self.version < self.total_steps:  # no gradient is computed that nobody applies
            self._read_and_compute(worker, now)
        return loss

    def eval_model(self) -> nn.Module:
        return self.model

    def finish(self) -> nn.Module:
        return self.model

    def figures(self) -> dict[str, Any]:
        return {"staleness": staleness_figures(self.staleness)}
