"""The training loop: epochs, each epoch's batch order, evaluation off the clock, the accuracy
curve, the per-epoch rows and progress. It drives a step function and knows neither which
one nor how many workers there are: collectives go through the `Strategy`, and what one
step does (one DDP optimizer step, one global step of emulated workers) is the step
function's business, with the few differences the loop must honour declared in its
`StepRules`.

Clocks (see docs/methodology.md):
- steps are timed between step boundaries, one mark each (the end of step k is the start of
  step k+1), so the summed step times cover the whole span of training between
  evaluations, host work between steps included: with perf_counter on the CPU, with CUDA
  events on a GPU, read only at evaluation points and epoch ends, so no step waits for the
  host;
- the training clock starts at the pre-training phase's time and adds every step time
  (warm-up steps included: they are real training work) and each epoch's shuffle;
  evaluation is timed apart and never on it;
- under data parallelism the clock at an evaluation or an epoch's end is the slowest rank's.

With `--stop-at-target` the loop ends at the first evaluation that reaches the target, the
same evaluation that time to target is read at; the rest of the plan is not trained.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.metrics import stats
from trainscale.parallel.strategy import Strategy
from trainscale.train.batches import WorkerBatches
from trainscale.train.divergence import StepLosses
from trainscale.train.evaluate import evaluate
from trainscale.train.plan import StepPlan
from trainscale.train.profiling import EVALUATION_MARK, step_profiler
from trainscale.train.progress import ProgressSink
from trainscale.train.records import CurvePoint, EpochRecord, Evaluation
from trainscale.train.summary import resolved_target
from trainscale.train.timing import StepTimes, make_clock

Batch = tuple[torch.Tensor, torch.Tensor]
Evaluator = Callable[[Any], tuple[float, float, float]]
"""(accuracy, mean loss, macro-F1) on the test set of a model the step function hands over
(another framework's model: PyTorch models have `evaluate`)."""


@dataclass(frozen=True)
class StepRules:
    """What sets a kind of step function apart in the loop's eyes."""

    samples_per_step: int
    """Samples behind one global step (progress lines count samples with it)."""
    draws_batches: bool = True
    """The loop draws each epoch's order (on the training clock) and hands every step its
    batch. False: the step draws its own (emulated workers walk their own shards)."""
    keeps_step_times: bool = True
    """Step times are measurements, returned for the statistics. False: they only make the
    training clock (an emulation's step times say nothing about N workers)."""


@dataclass(frozen=True)
class StepInput:
    """What the loop hands one step."""

    index: int
    """The global step, 0-based."""
    start: Any
    """The step's start mark on the loop's clock, which is the previous step's end mark (or
    the mark after an evaluation or at an epoch's start); breakdowns measure phases from it."""
    draw: Callable[[], Batch] | None
    """Slices (and augments) this step's batch, on the step's clock; None unless the step
    function's rules say the loop draws batches."""


class StepFunction(Protocol):
    """One global step of training, as the loop drives it."""

    rules: StepRules

    def step(self, given: StepInput) -> torch.Tensor:
        """Take one global step; returns its training loss (detached, a mean over the step's
        samples)."""

    def eval_model(self) -> Any:
        """The model to evaluate now (evaluating it changes nothing in training): a torch
        module, or what the loop's evaluator takes."""

    def finish(self) -> Any:
        """End training; returns the final model, unwrapped."""


@dataclass
class LoopOutcome:
    """What the loop measured, on this worker (clocks already the slowest rank's)."""

    step_times_s: list[float]
    """This worker's step times, warm-up included; empty when the rules keep none."""
    curve: list[CurvePoint]
    epochs: list[EpochRecord]
    train_clock_s: float
    eval_time_s: float
    eval_every: int
    evaluated: bool
    """Whether the run evaluated (real data, evaluation on): whether it may claim accuracy."""
    final: Evaluation | None
    """The last evaluation (after the last step when `evaluated`)."""
    model: Any
    """The final model, from the step function's `finish` (a framework's own model object
    outside PyTorch)."""
    stopped_at_target: bool = False
    """Whether training ended early, at the first evaluation that reached the target
    (`--stop-at-target`): `final` is that evaluation, and fewer steps than planned ran."""


def run_loop(
    stepper: StepFunction,
    plan: StepPlan,
    config: RunConfig,
    data: TensorData,
    strategy: Strategy,
    progress: ProgressSink,
    label: str,
    batches: WorkerBatches | None = None,
    clock_start_s: float = 0.0,
    evaluator: Evaluator | None = None,
) -> LoopOutcome:
    """Run `plan`'s steps of `stepper` epoch by epoch, evaluating every `eval_every` steps
    (default: four times an epoch) and at every epoch's end, off the training clock; with
    `stop_at_target`, only until an evaluation reaches the target accuracy.

    `batches` draws the worker's batches when the step function's rules say the loop does;
    `clock_start_s` is training time before the first step (a pre-training phase);
    `evaluator` scores the step function's `eval_model()` when it is no PyTorch module.
    """
    if stepper.rules.draws_batches and batches is None:
        raise ValueError("this step function takes its batches from the loop: give `batches`")
    loop = _Loop(stepper, plan, config, data, strategy, progress, batches, clock_start_s)
    loop.evaluator = evaluator
    return loop.run(label)


class _Loop:
    """The loop's state between steps (see `run_loop`)."""

    def __init__(
        self,
        stepper: StepFunction,
        plan: StepPlan,
        config: RunConfig,
        data: TensorData,
        strategy: Strategy,
        progress: ProgressSink,
        batches: WorkerBatches | None,
        clock_start_s: float,
    ) -> None:
        self.stepper = stepper
        self.rules = stepper.rules
        self.plan = plan
        self.config = config
        self.data = data
        self.strategy = strategy
        self.progress = progress
        self.batches = batches
        self.eval_every = config.measurement.eval_every or max(1, plan.steps_per_epoch // 4)
        # No accuracy claim from synthetic data, ever; none either when evaluation is off.
        self.evaluated = data.kind == "real" and config.measurement.evaluate
        self.stop_target = (
            resolved_target(config)
            if self.evaluated and config.measurement.stop_at_target
            else None
        )
        self.stopped_at_target = False
        # Reading a loss value synchronises a GPU with the host; only show it where it is free.
        self.show_loss = strategy.device.type == "cpu"
        self.clock = make_clock(strategy.device)
        self.times = StepTimes(self.clock)
        self.losses = StepLosses(strategy, plan.total_steps)
        """The current epoch's step losses (each epoch starts its own)."""
        self.train_clock_s = clock_start_s
        self.eval_time_s = 0.0
        self.step = 0
        self.curve: list[CurvePoint] = []
        self.epochs: list[EpochRecord] = []
        self.final: Evaluation | None = None
        # Not a bound method of this loop by default: that would be a reference cycle,
        # keeping the loop (and the DDP model it holds) alive past the strategy's teardown
        # until a garbage collection at exit, where gloo's threads then abort the process.
        self.evaluator: Evaluator | None = None
        self.profiled_step: Callable[[], None] = lambda: None
        """Called after every step: the profiler's step boundary under `--profile`."""

    def run(self, label: str) -> LoopOutcome:
        self.progress.start(self.plan.total_steps, label)
        device, rank = self.strategy.device, self.strategy.env.rank
        with step_profiler(self.config.measurement, device, rank) as self.profiled_step:
            for epoch in range(self.plan.num_epochs):
                self._epoch(epoch)
                if self.stopped_at_target:
                    break
        self.progress.stop()
        model = self.stepper.finish()
        return LoopOutcome(
            step_times_s=self.times.seconds if self.rules.keeps_step_times else [],
            curve=self.curve,
            epochs=self.epochs,
            train_clock_s=self.strategy.max_float(self.train_clock_s),
            eval_time_s=self.eval_time_s,
            eval_every=self.eval_every,
            evaluated=self.evaluated,
            final=self.final,
            model=model,
            stopped_at_target=self.stopped_at_target,
        )

    def _epoch(self, epoch: int) -> None:
        wall_t0 = time.perf_counter()
        epoch_train_s, eval_s0 = 0.0, self.eval_time_s
        order = None
        if self.batches is not None and self.rules.draws_batches:
            t0 = time.perf_counter()
            order = self.batches.epoch_order(epoch)
            shuffle_s = time.perf_counter() - t0
            epoch_train_s += shuffle_s
            self.train_clock_s += shuffle_s
        steps = min(self.plan.steps_per_epoch, self.plan.total_steps - self.step)
        self.losses = StepLosses(self.strategy, self.plan.total_steps, self.step, steps)
        # One mark per step boundary: a step ends where the next one starts, so the host's
        # work between steps (bookkeeping, progress, the next batch's draw) is on the clock
        # even when the GPU idles through it. Only an evaluation breaks the chain: a fresh
        # mark after it keeps it off the clock.
        boundary = self.clock.mark()
        taken = 0
        for batch in range(steps):
            draw = (
                None
                if order is None or self.batches is None
                else functools.partial(self.batches.batch, order, batch)
            )
            start = boundary
            loss = self.stepper.step(StepInput(self.step, start, draw))
            boundary = self.clock.mark()
            self.times.add(start, boundary)
            self.losses.add(loss)
            self.step += 1
            taken += 1
            if self.step % 10 == 0 or self.step == self.plan.total_steps:
                shown = {"loss": self.losses.mean()} if self.show_loss else {}
                self.progress.update(self.step, **shown)
            # Every epoch ends with an evaluation, for the per-epoch rows and curve.
            if self.evaluated and (self.step % self.eval_every == 0 or batch == steps - 1):
                self._evaluate()
                boundary = self.clock.mark()
                if self._stops_here():
                    break
            self.profiled_step()  # a profiled step's span holds its evaluation, marked
        self._settle()
        epoch_train_s += sum(self.times.seconds[self.step - taken : self.step])
        self.epochs.append(
            EpochRecord(
                epoch=epoch + 1,
                train_loss=self.losses.global_mean(),  # every rank's samples
                test_loss=self.final.loss if self.final is not None else None,
                test_accuracy=self.final.accuracy if self.final is not None else None,
                train_clock_s=self.strategy.max_float(self.train_clock_s),
                epoch_time_s=self.strategy.max_float(epoch_train_s),
                eval_time_s=self.eval_time_s - eval_s0,
                full=taken == self.plan.steps_per_epoch,
                global_steps=self.step,
                wall_s=time.perf_counter() - wall_t0,
            )
        )

    def _stops_here(self) -> bool:
        """Whether training ends at the evaluation just made: `--stop-at-target`, and it
        reached the target by time to target's rule (`stats.first_reaching`).

        Every rank decides alike, so none leaves while a peer waits in a collective: each
        evaluator (PyTorch's and the other frameworks') sums its counts over all ranks
        before dividing, so every rank holds the same accuracy, bit for bit (whole counts
        add exactly in float64, in any order).
        """
        if self.stop_target is None or not self.curve:
            return False
        point = self.curve[-1]
        if stats.first_reaching([(point.clock_s, point.accuracy)], self.stop_target) is None:
            return False
        self.stopped_at_target = True
        self.progress.update(self.step)
        self.progress.log(
            f"stopped at the target ({self.stop_target:.4f}) after step {self.step} of "
            f"{self.plan.total_steps} (--stop-at-target)"
        )
        return True

    def _evaluate_torch(self, model: nn.Module) -> tuple[float, float, float]:
        return evaluate(
            model,
            self.data,
            self.strategy,
            self.config.optimisation.precision,
            self.config.parallel.channels_last,
        )

    def _settle(self) -> None:
        """Resolve the pending step times onto the training clock (a GPU synchronises)."""
        self.train_clock_s += sum(self.times.pending())
        self.losses.check()  # a diverged run stops here, where the loop syncs anyway

    def _evaluate(self) -> None:
        self._settle()
        t0 = time.perf_counter()
        score = self.evaluator or self._evaluate_torch
        with torch.profiler.record_function(EVALUATION_MARK):
            self.final = Evaluation(*score(self.stepper.eval_model()))
        # Ranks run in lock-step; the slowest one's clock is the run's clock at this point.
        clock_s = self.strategy.max_float(self.train_clock_s)
        self.curve.append(CurvePoint(clock_s, self.step, self.final.accuracy))
        self.eval_time_s += time.perf_counter() - t0
        self.progress.log(
            f"step {self.step}/{self.plan.total_steps}  "
            f"samples {self.step * self.rules.samples_per_step}  train clock {clock_s:.1f}s  "
            f"test accuracy {self.final.accuracy:.4f}  test loss {self.final.loss:.4f}"
        )
