"""`trainscale recommend SCRIPT.py --check-accuracy -- ARGS`: a script's accuracy, checked by
running it whole.

A script has an accuracy only where it calls `meter.evaluate(accuracy=...)`, at its own
cadence, which a throughput trial stopped after a few steps has usually not reached. So,
asked to, the check runs the whole script (to its own end, with its own arguments, which
the user shortens) after the search: once in the serial baseline setting, then in each
finalist best first, until one's final accuracy (the stored run's last evaluation) is within
the tolerance of the baseline's, by the rule of a workload's check
(`trials.accuracy_rejection`). The first that passes is recommended; where none does, the
baseline. These runs take as long as the script takes, which no budget can bound: the user
chose them, so they run outside `--budget-s`, and the plan says how many there may be.

Nothing is compared where the baseline is already the fastest setting (it passes by
definition), where the script evaluated nothing (the throughput recommendation stands), or
where the baseline's whole run failed (the failure is the result: the command exits 1).
"""

from __future__ import annotations

from collections.abc import Callable

from trainscale.advisor.space import Candidate, Space
from trainscale.advisor.trials import (
    Attempt,
    Ranked,
    Rejection,
    accuracy_rejection,
)
from trainscale.config.options import RunOptions

EVALUATED_NOTHING = (
    "the script evaluated nothing: accuracy not checked (its whole run in the serial baseline "
    "never called meter.evaluate(accuracy=...)); the recommendation is throughput only"
)
"""The check's end for a script without evaluations."""

NOTHING_TO_CHECK = (
    "accuracy not checked: the serial baseline is the fastest setting, and it keeps its own "
    "accuracy by definition (no whole script run made)"
)
"""The check's end where the search recommends the baseline itself."""


def whole_runs_at_most(space: Space) -> int:
    """Whole script runs the check may make: the baseline's, and one per other candidate
    (at worst every finalist ranked above the baseline is rejected)."""
    return 1 + sum(1 for c in space.candidates if c != space.baseline)


def plan_note(space: Space, tolerance: float) -> str:
    """The plan's line: what the check will run, how many times at most, and that the
    budget does not bound it. `tolerance` is a fraction."""
    return (
        f"accuracy check after the search: up to {whole_runs_at_most(space)} whole script "
        "runs (the serial baseline's, then the finalists' best first until one's final "
        f"accuracy is within {tolerance * 100:.2f} points of it), each to the script's own "
        "end with its own arguments (make it short with them, e.g. -- --epochs 1); "
        "--budget-s does not bound them"
    )


class WholeRunCheck:
    """The `search.FinalistsCheck` of a script: whole runs after the search. After it ran,
    `ended` says why nothing was compared (None where accuracies were), and `failed` whether
    that is because the baseline's whole run failed."""

    def __init__(self, base: RunOptions, baseline: Candidate, tolerance: float) -> None:
        self.base = base
        """The options of every run of the script (its data, the recommend's tag): no step
        limit, so a run goes to the script's own end."""
        self.baseline = baseline
        self.tolerance = tolerance
        self.ended: str | None = None
        self.failed = False

    def __call__(
        self, ranking: list[Ranked], attempt: Attempt, note: Callable[[str], None]
    ) -> tuple[float | None, Ranked | None, float | None, list[Rejection]]:
        if ranking[0].candidate == self.baseline:
            return self._end(NOTHING_TO_CHECK)
        trial = attempt(self.baseline, self.baseline.options(self.base), "accuracy", None)
        if not trial.ok:
            self.failed = True
            return self._end(
                f"the serial baseline's whole script run failed ({trial.error}): accuracy not "
                "checked; the throughput recommendation stands"
            )
        baseline_accuracy = trial.test_accuracy
        if baseline_accuracy is None:
            return self._end(EVALUATED_NOTHING)
        rejected: list[Rejection] = []
        for entry in ranking:
            candidate = entry.candidate
            if candidate == self.baseline:  # passes by definition: measured already
                return baseline_accuracy, entry, baseline_accuracy, rejected
            trial = attempt(candidate, candidate.options(self.base), "accuracy", None)
            reason = accuracy_rejection(trial, baseline_accuracy, self.tolerance)
            if reason is None:
                return baseline_accuracy, entry, trial.test_accuracy, rejected
            rejected.append(Rejection(candidate, reason, trial.test_accuracy))
            note(f"rejected {candidate.label}: {reason}")
        return baseline_accuracy, None, None, rejected

    def _end(self, why: str) -> tuple[None, None, None, list[Rejection]]:
        """Nothing compared: the ranking stands. `why` is the result's accuracy line (not a
        note too: it would be said twice)."""
        self.ended = why
        return None, None, None, []
