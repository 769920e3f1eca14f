"""What the recommend search found (`Recommendation`), and its words on busy trials."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainscale.advisor.space import Candidate
from trainscale.advisor.trials import Ranked, Rejection, Trial
from trainscale.metrics.run_flags import NOT_TRUSTED


@dataclass
class Recommendation:
    """What the search found."""

    best: Candidate
    best_samples_per_s: float | None
    best_rung: int | None
    baseline: Candidate
    baseline_samples_per_s: float | None
    """The baseline's throughput in the same rung as the best's measurement."""
    best_global_batch: int | None
    """The best's global batch: a workload's as set, a script's as its trials measured."""
    baseline_global_batch: int | None
    speedup: float | None
    accuracy_checked: bool
    baseline_accuracy: float | None
    best_accuracy: float | None
    ranking: list[Ranked]
    rejected: list[Rejection]
    trials: list[Trial]
    rungs_completed: int
    elapsed_s: float
    budget_s: float
    stopped_by_budget: bool
    notes: list[str] = field(default_factory=list)
    include_busy: bool = False
    """Whether throughput trials on a busy machine were ranked like the others."""
    trusted: bool = True
    """False where every measured throughput trial ran on a busy machine, so the ranking
    rests on them (the busy rule, metrics/run_flags.py)."""
    busiest: list[str] = field(default_factory=list)
    """The other processes that used the most CPU at the end of an untrusted search."""
    candidates_measured: int = 0
    """Candidates (the baseline among them) with a throughput measurement in the ranking."""
    candidates_total: int = 0
    """Candidates in the space, the baseline among them."""
    budget_needed_s: float | None = None
    """About how many seconds the whole search would take here (every candidate measured),
    from the trials' measured times; None when nothing was measured to estimate from."""

    @property
    def only_baseline(self) -> bool:
        """Nothing but the serial baseline was measured: there was nothing to choose from."""
        return self.candidates_measured <= 1 and self.best == self.baseline

    @property
    def busy_trials(self) -> list[Trial]:
        """Throughput trials that ran on a busy machine (left out unless `include_busy`)."""
        return [t for t in self.trials if t.kind == "throughput" and t.ok and t.busy]

    def busy_line(self) -> str | None:
        """How many throughput trials ran on a busy machine and what became of them."""
        busy = len(self.busy_trials)
        if not busy:
            return None
        total = sum(1 for t in self.trials if t.kind == "throughput" and t.ok)
        if not self.trusted:
            neighbours = ", ".join(self.busiest) or "other processes"
            return (
                f"{NOT_TRUSTED}: every measured throughput trial ({busy}) ran while other "
                f"work used their cores ({neighbours}), so they were ranked anyway and this "
                "recommendation is not trusted: stop that work, or run again when the "
                "machine is quiet"
            )
        if self.include_busy:
            return (
                f"kept {busy} of {total} throughput trial(s) that ran on a busy machine "
                "(--include-busy): other work used their cores, so their speed is not trusted"
            )
        return (
            f"left out {busy} of {total} throughput trial(s) that ran on a busy machine: other "
            "work used their cores, so their speed says little about the setting "
            "(--include-busy keeps them)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "busy_left_out": 0 if self.include_busy or not self.trusted else len(self.busy_trials),
            "trusted": self.trusted,
            "busy_note": self.busy_line(),
            "best": self.best.to_dict(),
            "best_samples_per_s": self.best_samples_per_s,
            "best_rung": self.best_rung,
            "baseline": self.baseline.to_dict(),
            "baseline_samples_per_s": self.baseline_samples_per_s,
            "best_global_batch": self.best_global_batch,
            "baseline_global_batch": self.baseline_global_batch,
            "speedup": self.speedup,
            "accuracy_checked": self.accuracy_checked,
            "baseline_accuracy": self.baseline_accuracy,
            "best_accuracy": self.best_accuracy,
            "ranking": [
                {"label": r.candidate.label, "rung": r.rung, "samples_per_s": r.samples_per_s}
                for r in self.ranking
            ],
            "rejected": [
                {"label": r.candidate.label, "reason": r.reason, "test_accuracy": r.test_accuracy}
                for r in self.rejected
            ],
            "trials": [t.to_dict() for t in self.trials],
            "rungs_completed": self.rungs_completed,
            "elapsed_s": self.elapsed_s,
            "budget_s": self.budget_s,
            "stopped_by_budget": self.stopped_by_budget,
            "candidates_measured": self.candidates_measured,
            "candidates_total": self.candidates_total,
            "budget_needed_s": self.budget_needed_s,
            "only_baseline": self.only_baseline,
            "notes": list(self.notes),
        }
