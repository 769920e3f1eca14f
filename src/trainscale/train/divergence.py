"""Noticing a diverged run: a non-finite training loss (NaN or infinity) at any step.

A run whose loss became NaN trains on garbage from then on; its throughput and accuracy
must not be stored as a completed measurement. Reading each step's loss on the host would
make a GPU wait for every step, so the watch keeps, on the loss's device, the first step
whose loss was not finite, and looks at it only where the loop synchronises anyway (an
evaluation point, an epoch's end: see train/loop.py), where all ranks take part so that
every rank stops at the same point rather than some waiting on a collective for the rest.
"""

from __future__ import annotations

import math

import torch

from trainscale.errors import TrainscaleError
from trainscale.parallel.strategy import Strategy

_NONE_YET = float("inf")
"""The first bad step while every loss so far was finite."""


class TrainingDiverged(TrainscaleError):
    """The training loss was NaN or infinite at some step: the run is stored as failed.

    A TrainscaleError: its message is the one line the run is stored with, as it stands."""

    def __init__(self, step: int, total_steps: int) -> None:
        super().__init__(
            f"diverged: non-finite loss at step {step} of {total_steps} (lower the "
            "learning rate, or check the model and the data for NaN)"
        )
        self.step = step


class DivergenceWatch:
    """The first step (1-based) whose loss was not finite, kept on the device.

    `observe` costs a few tiny device operations per step and never waits for the device;
    `check` reads the value (a synchronisation) and raises TrainingDiverged if any rank saw
    a non-finite loss.
    """

    def __init__(self, strategy: Strategy, total_steps: int) -> None:
        self.strategy = strategy
        self.total_steps = total_steps
        self._first_bad = torch.full((), _NONE_YET, device=strategy.device)

    def observe(self, loss: torch.Tensor, step: int) -> None:
        """Note the loss of the step of 0-based index `step` (a detached tensor)."""
        finite = torch.isfinite(loss.detach()).all()
        bad_at = torch.where(finite, _NONE_YET, float(step + 1)).to(self._first_bad.device)
        torch.minimum(self._first_bad, bad_at, out=self._first_bad)

    def check(self) -> None:
        """Raise TrainingDiverged when any rank has seen a non-finite loss so far.

        Collective: every rank must call it at the same point (the loop does, at evaluation
        points and epoch ends), and all of them raise together.
        """
        # The smallest first bad step over the ranks, as the largest of its negation.
        first_bad = -self.strategy.max_float(-float(self._first_bad))
        if not math.isinf(first_bad):
            raise TrainingDiverged(int(first_bad), self.total_steps)
