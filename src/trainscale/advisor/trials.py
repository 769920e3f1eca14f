"""One trial of the recommend search: the run options it makes, what it measured, and the
accuracy check's rule (advisor/search.py runs them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainscale.advisor.space import Candidate
from trainscale.config.options import RunOptions

RunOne = Callable[[RunOptions], dict[str, Any]]
"""Runs one trial and returns its stored result (`execute_run`'s dict); raises RunFailed or
TrainscaleError when the run fails."""
EVAL_AT_END = 1_000_000_000
"""`eval_every` for accuracy runs: larger than any run, so they evaluate once, at the end."""


@dataclass(frozen=True)
class Trial:
    """One run the search made (stored in the results store when it got that far)."""

    candidate: Candidate
    kind: str
    """'throughput' (synthetic data, no evaluation) or 'accuracy' (real data, evaluated)."""
    rung: int | None
    """Rung of a throughput trial; None for accuracy runs."""
    run_id: str | None
    wall_s: float
    """Wall-clock seconds of the whole trial (launch, data, training, evaluation)."""
    samples_per_s: float | None = None
    test_accuracy: float | None = None
    train_time_s: float | None = None
    num_samples: int | None = None
    num_steps: int | None = None
    """Steps the run trained (a script that ends early trains fewer than its trial's)."""
    global_batch: int | None = None
    """The run's global batch: a workload's as set, a script's as measured."""
    error: str | None = None
    busy: bool = False
    """The run was stored as busy: other work used its cores (see hardware/contention.py)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.candidate.label,
            "kind": self.kind,
            "rung": self.rung,
            "run_id": self.run_id,
            "wall_s": self.wall_s,
            "samples_per_s": self.samples_per_s,
            "test_accuracy": self.test_accuracy,
            "num_steps": self.num_steps,
            "global_batch_size": self.global_batch,
            "error": self.error,
            "busy": self.busy,
        }


@dataclass(frozen=True)
class Rejection:
    """A finalist the accuracy check turned down."""

    candidate: Candidate
    reason: str
    test_accuracy: float | None = None


@dataclass(frozen=True)
class Ranked:
    """A candidate's place after the search: the last rung it reached and its throughput
    there."""

    candidate: Candidate
    rung: int
    samples_per_s: float


Attempt = Callable[[Candidate, RunOptions, str, int | None], Trial]
"""Makes one run of the search (`_Search.attempt`): (candidate, options, kind, rung) -> its
trial, which the search keeps and its listener hears of."""


def accuracy_rejection(trial: Trial, baseline_accuracy: float, tolerance: float) -> str | None:
    """Why the accuracy run `trial` fails the check, or None when it keeps the baseline's
    accuracy: it failed, it reported no accuracy, or its test accuracy is lower than
    `baseline_accuracy` by more than `tolerance` (a fraction)."""
    if not trial.ok or trial.test_accuracy is None:
        return f"accuracy run failed: {trial.error or 'no accuracy reported'}"
    drop = baseline_accuracy - trial.test_accuracy
    if drop > tolerance:
        return (
            f"test accuracy {trial.test_accuracy:.4f} is {drop * 100:.2f} points below "
            f"the baseline's {baseline_accuracy:.4f} (tolerance {tolerance * 100:.2f})"
        )
    return None


def throughput_options(candidate: Candidate, base: RunOptions, timed_steps: int, warmup: int):
    """The run options of a throughput trial: `timed_steps` measured after `warmup`."""
    return candidate.options(base).with_(
        steps=timed_steps + warmup,
        epochs=None,
        warmup_steps_untimed=warmup,
        evaluate=False,
        eval_every=None,
    )


def accuracy_options(candidate: Candidate, base: RunOptions, epochs: float) -> RunOptions:
    """The run options of an accuracy check: `epochs` of real data, evaluated at the end.

    Epochs rather than steps, so every setting sees the same number of samples whatever its
    global batch (to within one batch).
    """
    return candidate.options(base).with_(
        epochs=epochs,
        steps=None,
        evaluate=True,
        eval_every=EVAL_AT_END,
    )
