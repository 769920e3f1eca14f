"""Progress of `trainscale recommend` on stderr: the plan, then one line per trial."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from trainscale.advisor.run import RecommendListener
from trainscale.hardware.facts import gpus_text

if TYPE_CHECKING:
    from trainscale.advisor.run import RecommendPlan
    from trainscale.advisor.space import Candidate
    from trainscale.advisor.trials import Trial


class RecommendProgress(RecommendListener):
    """The plan, then one line per trial, with the time spent so far against the budget."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.budget_s = 0.0
        self.start = time.monotonic()
        self.script = False
        self.warmup_steps = 0
        self.whole_runs = 0

    def planned(self, plan: RecommendPlan) -> None:
        env, space, settings = plan.env, plan.space, plan.settings
        self.console.print(
            f"[bold]trainscale recommend {plan.recommend_id}[/]: {plan.workload} on "
            f"{escape(str(env['cpu_model']))}, {len(env['usable_cores'])} usable cores"
            f"{escape(gpus_text(env))}; "
            f"{len(space.candidates)} candidates, rungs of "
            f"{', '.join(map(str, settings.rung_steps))} timed steps, budget "
            f"{settings.budget_s:.0f} s"
        )
        for line in space.skipped:
            self.console.print(f"  {escape(line)}")
        for dropped, kept in space.duplicates:
            self.console.print(escape(f"  {dropped}: same cores as {kept}, not tried twice"))
        if plan.data_note:
            # A warning, except the plan of a script's accuracy check, which the user asked for.
            style = "bold" if plan.check_accuracy else "bold red"
            self.console.print(f"[{style}]{escape(plan.data_note)}[/]")
        self.budget_s = settings.budget_s
        self.script, self.warmup_steps = plan.script is not None, settings.warmup_steps
        self.start = time.monotonic()

    def _clock(self) -> str:
        return f"[{time.monotonic() - self.start:5.0f}/{self.budget_s:.0f} s]"

    def rung_started(self, rung: int, timed_steps: int, candidates: list[Candidate]) -> None:
        # A script's trials train its own data, each stopped by the meter after its steps.
        how = (
            f"the script stopped after {timed_steps + self.warmup_steps} steps"
            if self.script
            else "synthetic data"
        )
        self.console.rule(
            f"rung {rung}: {len(candidates)} setting(s) x {timed_steps} timed steps ({how})"
        )

    def trial_started(self, candidate: Candidate, kind: str, rung: int | None) -> None:
        if kind == "accuracy" and self.script:
            # Whole runs, outside the budget: their clock is not set against it.
            if not self.whole_runs:
                self.console.rule("accuracy check: the whole script (not bounded by the budget)")
            self.whole_runs += 1
            clock = f"[{time.monotonic() - self.start:5.0f} s]"
            self.console.print(escape(f"{clock} whole script run: {candidate.label} ..."))
            return
        what = "accuracy check" if kind == "accuracy" else "throughput"
        self.console.print(escape(f"{self._clock()} {what}: {candidate.label} ..."))

    def trial_finished(self, trial: Trial) -> None:
        # Run ids are hex: "[d2f4...]" would be read as a style tag, so escape them.
        run = escape(f" [{trial.run_id[:8]}]") if trial.run_id else ""
        if trial.error is not None:
            self.console.print(f"    [red]failed[/]{run}: {escape(trial.error)}")
        elif trial.kind == "accuracy" and trial.test_accuracy is None:
            self.console.print(f"    no accuracy: it evaluated nothing{run}")
        elif trial.kind == "accuracy":
            self.console.print(f"    test accuracy {trial.test_accuracy:.4f}{run}")
        else:
            self.console.print(f"    {trial.samples_per_s:.0f} samples/s{run}")

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]{escape(text)}[/]")
