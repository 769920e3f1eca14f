"""One optimizer step of a run, serial or data-parallel: the step function the trainer's
loop drives.

A step slices its batch (through the loop's `draw`), splits it into `grad_accum`
micro-batches whose gradients accumulate (under DDP only the last one communicates: the
others run in `no_sync`), runs each forward under the precision's autocast and each backward
through the fp16 grad scaler, then takes the optimizer and lr-scheduler steps. Sampled steps
mark where their time goes (train/breakdown.py).
"""

from __future__ import annotations

import functools
import time
from contextlib import nullcontext

import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.parallel.strategy import Strategy
from trainscale.train.batches import WorkerBatches
from trainscale.train.breakdown import Breakdown, timed_allreduce_hook
from trainscale.train.compile import mark_cuda_graph_step
from trainscale.train.divergence import StepLosses
from trainscale.train.faults import FaultInjector
from trainscale.train.loop import StepInput, StepRules
from trainscale.train.loss import LossFn
from trainscale.train.lr import make_optimisation
from trainscale.train.plan import StepPlan
from trainscale.train.precision import autocast, make_grad_scaler
from trainscale.train.timing import make_clock
from trainscale.train.warmup import training_untouched
from trainscale.workloads.base import Workload


class TrainStep:
    """One optimizer step of `model` (wrapped by `strategy`) over `plan`'s steps."""

    def __init__(
        self,
        config: RunConfig,
        workload: Workload,
        strategy: Strategy,
        model: nn.Module,
        plan: StepPlan,
        loss: LossFn,
    ) -> None:
        """`loss` is the step's loss function (`train.loss.run_loss`, compiled with the model
        under `--compile`: `PreparedModel.loss`)."""
        device = strategy.device
        self.config = config
        self.workload = workload
        self.strategy = strategy
        self.model = model
        self.loss = loss
        self.device = device
        self.rules = StepRules(samples_per_step=config.optimisation.global_batch_size)
        self.optimizer, self.scheduler = make_optimisation(
            model, config, plan.total_steps, fused=device.type == "cuda"
        )
        self.scaler = make_grad_scaler(device, config.optimisation.precision)
        self.accumulate = config.parallel.grad_accum
        self.micro = config.optimisation.batch_size // self.accumulate
        measurement = config.measurement
        self.breakdown = Breakdown(
            make_clock(device), measurement.breakdown_every, measurement.warmup_steps_untimed
        )
        self.comm_marked = measurement.breakdown_every > 0 and strategy.hook_communication(
            model, timed_allreduce_hook, self.breakdown
        )
        """Whether a communication hook marks gradient buckets (exposed communication)."""
        self.faults = FaultInjector(strategy.env.rank)

    def step(self, given: StepInput) -> torch.Tensor:
        """One optimizer step on the loop's batch; returns the mean loss over its samples
        (the mean of its micro-batches' losses)."""
        if given.draw is None:
            raise ValueError("a training step takes its batch from the loop")
        breakdown = self.breakdown if self.breakdown.sampled(given.index) else None
        if breakdown:
            breakdown.begin(given.start)
        x, y = given.draw()
        if breakdown:
            breakdown.mark("data")
        mark_cuda_graph_step(self.config.optimisation.compile_mode, self.device)
        self.optimizer.zero_grad(set_to_none=True)
        step_loss: torch.Tensor | None = None
        micro = self.micro
        for part in range(self.accumulate):
            last = part == self.accumulate - 1
            # Only the last micro-batch communicates; the others accumulate locally.
            with nullcontext() if last else self.strategy.no_sync(self.model):
                with autocast(self.device, self.config.optimisation.precision):
                    loss = self.loss(
                        self.model(x[part * micro : (part + 1) * micro]),
                        y[part * micro : (part + 1) * micro],
                    )
                if self.accumulate > 1:
                    loss = loss / self.accumulate
                if breakdown:
                    breakdown.mark("forward")
                (self.scaler.scale(loss) if self.scaler else loss).backward()
                if breakdown:
                    breakdown.mark("backward")
            # Each micro-batch's share: the sum is the mean loss over the step's samples.
            share = loss.detach().float()
            step_loss = share if step_loss is None else step_loss + share
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        if breakdown:
            breakdown.mark("optimizer")
            breakdown.end()
        self.faults.after_step(given.index + 1)
        assert step_loss is not None  # grad_accum >= 1: at least one micro-batch ran
        return step_loss

    def warm_up(self, batches: WorkerBatches) -> float:
        """Seconds of one step of this run's own training, waited for, that leaves no trace
        (train/warmup.py): the first batch of the first epoch, the loss kept as the loop keeps
        it. Every rank takes it at the same point (its all-reduce is the run's)."""
        t0 = time.perf_counter()
        untouched = training_untouched(
            self.model, self.optimizer, self.scheduler, [batches.augmentation], self.device
        )
        with untouched:
            draw = functools.partial(batches.batch, batches.epoch_order(0), 0)
            # Index -1: before every step the breakdown samples or a fault is injected at.
            loss = self.step(StepInput(-1, None, draw))
            StepLosses(self.strategy, 1).add(loss)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        # A fresh loss scaler: the step may have moved the scale.
        self.scaler = make_grad_scaler(self.device, self.config.optimisation.precision)
        return time.perf_counter() - t0

    def eval_model(self) -> nn.Module:
        return self.strategy.unwrap(self.model)

    def finish(self) -> nn.Module:
        return self.strategy.unwrap(self.model)
