"""An epoch's step losses, and noticing a diverged run: a non-finite training loss (NaN or
infinity) at any step.

A run whose loss became NaN trains on garbage from then on; its throughput and accuracy
must not be stored as a completed measurement. Reading each step's loss on the host would
make a GPU wait for every step, so each step's loss is written into a slot on its device
(one copy, the only per-step work), and the loop reads the slots only where it synchronises
anyway (an evaluation point, an epoch's end: see train/loop.py): their mean for the epoch's
row, and the first that was not finite, where all ranks take part so that every rank stops
at the same point rather than some waiting on a collective for the rest. A launch-bound GPU
step pays for every operator it issues (about 28 us each on an H200's host, `trainscale
probe`): profiled there (benchmarks/results/gpu_mnist_profile_h200/), the running sum and
finiteness test a step used to issue took 0.29 ms of a 4.2 ms mnist-cnn step.
"""

from __future__ import annotations

import math

import torch

from trainscale.errors import TrainscaleError
from trainscale.parallel.strategy import Strategy


class TrainingDiverged(TrainscaleError):
    """The training loss was NaN or infinite at some step: the run is stored as failed.

    A TrainscaleError: its message is the one line the run is stored with, as it stands."""

    def __init__(self, step: int, total_steps: int) -> None:
        super().__init__(
            f"diverged: non-finite loss at step {step} of {total_steps} (lower the "
            "learning rate, or check the model and the data for NaN)"
        )
        self.step = step


class StepLosses:
    """The losses of an epoch's steps (at most `capacity`, the first being the run's step of
    0-based index `first_step`), kept on the device.

    `add` writes a step's loss without reading it; `mean` and `check` read them (a
    synchronisation). `check` raises TrainingDiverged if any rank saw a non-finite loss.
    """

    def __init__(
        self, strategy: Strategy, total_steps: int, first_step: int = 0, capacity: int = 1
    ) -> None:
        self.strategy = strategy
        self.total_steps = total_steps
        self.first_step = first_step
        self._losses = torch.zeros(max(1, capacity), device=strategy.device)
        self.count = 0
        self._checked = 0
        """Slots before this one were checked finite."""

    def add(self, loss: torch.Tensor | float) -> None:
        """Keep the next step's loss (a detached tensor, or a number)."""
        self._losses[self.count] = loss
        self.count += 1

    def mean(self) -> float:
        """The mean loss of this rank's steps kept so far (0.0 before any)."""
        return float(self._losses[: self.count].sum()) / max(1, self.count)

    def global_mean(self) -> float:
        """The mean loss of the steps kept so far over every rank's samples (0.0 before
        any): each rank's loss is its own batch's mean, and ranks' batches are equal.

        Collective: every rank must call it at the same point (the loop does, at epoch ends).
        """
        kept = self._losses[: self.count].double().sum().reshape(1)
        totals = self.strategy.sum_tensor(torch.cat([kept, kept.new_tensor([self.count])]))
        loss_sum, count = totals.tolist()
        return loss_sum / max(1.0, count)

    def check(self) -> None:
        """Raise TrainingDiverged when any rank has seen a non-finite loss so far.

        Collective: every rank must call it at the same point (the loop does, at evaluation
        points and epoch ends), and all of them raise together.
        """
        unchecked = self._losses[self._checked : self.count]
        bad = torch.nonzero(~torch.isfinite(unchecked))
        first_bad = (
            float(self.first_step + self._checked + int(bad[0, 0]) + 1) if len(bad) else math.inf
        )
        self._checked = self.count
        # The smallest first bad step over the ranks, as the largest of its negation.
        first_bad = -self.strategy.max_float(-first_bad)
        if not math.isinf(first_bad):
            raise TrainingDiverged(int(first_bad), self.total_steps)
