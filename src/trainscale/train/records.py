"""The training loop's raw records: evaluations, points of the accuracy curve, epochs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NamedTuple


class Evaluation(NamedTuple):
    """One evaluation on the full test set."""

    accuracy: float
    loss: float
    macro_f1: float


class CurvePoint(NamedTuple):
    """An evaluation's place on the accuracy curve."""

    clock_s: float
    """The training clock at the evaluation (slowest rank's)."""
    step: int
    """Global steps taken before it."""
    accuracy: float


@dataclass(frozen=True)
class EpochRecord:
    """One epoch of the loop, as stored in a run's per-epoch rows."""

    epoch: int
    """1-based."""
    train_loss: float
    """Mean training loss over the epoch's steps (each step's mean over its samples)."""
    test_loss: float | None
    test_accuracy: float | None
    """After the epoch's last step; None when the run makes no accuracy claim."""
    train_clock_s: float
    """The training clock at the epoch's end (slowest rank's)."""
    epoch_time_s: float
    """Training clock spent in the epoch: its steps and its shuffle (slowest rank's)."""
    eval_time_s: float
    """Evaluation time during the epoch (off the training clock)."""
    full: bool
    """Whether the epoch took all its steps (the last one of a run may be partial)."""
    global_steps: int
    """Global steps taken by the epoch's end."""
    wall_s: float
    """Wall-clock seconds of the epoch, evaluation included."""

    def as_row(self) -> dict[str, Any]:
        """The epoch as a dict (the form the store and callers take)."""
        return asdict(self)
