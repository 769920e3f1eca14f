"""Short progress lines for the API's `progress=True`: plain text on stderr from this
process, one line per setting or run, so it reads the same in a terminal, a log and a
notebook cell (the CLI's progress bars redraw in place, which a notebook shows poorly)."""

from __future__ import annotations

import sys
from typing import Any

from trainscale.advisor.run import RecommendListener, RecommendPlan
from trainscale.advisor.trials import Trial
from trainscale.benchmark.run import BenchListener, BenchResult
from trainscale.emulation.run import EmulationListener
from trainscale.sweeps.run import SweepRunListener


def say(text: str) -> None:
    """One progress line on stderr."""
    print(f"trainscale: {text}", file=sys.stderr, flush=True)


class BenchLines(BenchListener):
    """A bench's plan, each setting as it starts, and failures."""

    def data_note(self, note: str) -> None:
        say(note)

    def started(self, result: BenchResult, runnable: int) -> None:
        say(
            f"bench {result.bench_id}: {result.workload}, {runnable} settings x "
            f"{result.rounds} rounds x {result.steps_per_run} steps, "
            f"{result.batch_text}, data {result.options.data.kind}"
        )

    def rung_started(self, index: int, total: int, rung: Any) -> None:
        say(f"[{index}/{total}] {rung.name}")

    def rung_failed(self, rung: Any, error: str) -> None:
        say(f"{rung.name} failed: {error}")

    def busy_round(self, result: BenchResult, busiest: list[Any], again: bool) -> None:
        say(result.busy_round_line(busiest, again))

    def full_recipe_started(self, fastest: Any) -> None:
        say(f"full recipe on the fastest setting: {fastest.name}")


class SweepLines(SweepRunListener):
    """A sweep's size, each run as it starts, and failures."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0

    def start(self, sweep_id: str, todo: int, done: int) -> None:
        self.total = todo
        skipped = f" ({done} already done)" if done else ""
        say(f"sweep {sweep_id[:8]}: {todo} run(s) to make{skipped}")

    def run_started(self, planned: Any) -> None:
        self.done += 1
        say(f"[{self.done}/{self.total}] {planned.label}, repeat {planned.repeat}")

    def run_finished(self, planned: Any, result: Any, error: str | None) -> None:
        if error is not None:
            say(f"{planned.label}, repeat {planned.repeat} failed: {error}")


class RecommendLines(RecommendListener):
    """A search's plan, each trial as it ends, and its notes (budget stops, rejections)."""

    def planned(self, plan: RecommendPlan) -> None:
        say(
            f"recommend {plan.recommend_id}: {plan.workload}, "
            f"{len(plan.space.candidates)} candidates, budget {plan.settings.budget_s:.0f} s"
        )

    def trial_finished(self, trial: Trial) -> None:
        where = f"rung {trial.rung}" if trial.rung is not None else "accuracy"
        if not trial.ok:
            say(f"{trial.candidate.label} ({where}) failed: {trial.error}")
        elif trial.kind == "accuracy":
            accuracy = "-" if trial.test_accuracy is None else f"{trial.test_accuracy:.4f}"
            say(f"{trial.candidate.label} ({where}): test accuracy {accuracy}")
        else:
            rate = "-" if trial.samples_per_s is None else f"{trial.samples_per_s:,.0f}"
            say(f"{trial.candidate.label} ({where}): {rate} samples/s")

    def note(self, text: str) -> None:
        say(text)


class EmulationLines(EmulationListener):
    """Each worker count as it starts training."""

    def started(self, index: int, total: int, spec: Any, config: Any, plan: Any) -> None:
        say(f"[{index}/{total}] {spec.workers} worker(s), {spec.mode}")
