"""Progress of `trainscale sweep` on stderr: the plan, a progress bar over the runs, one line
per finished run, and the summary table at the end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from trainscale.cli.console import table_console, uncut
from trainscale.metrics.run_flags import stall_text
from trainscale.sweeps.run import SweepRunListener
from trainscale.sweeps.summary import SUMMARY_HEADERS

if TYPE_CHECKING:
    from pathlib import Path

    from trainscale.sweeps.plan import Plan
    from trainscale.sweeps.run import SweepResult
    from trainscale.sweeps.spec import SweepSpec


def planned_time_text(spec: SweepSpec, runs: int) -> str:
    """The sweep's rough duration and its basis: arithmetic from the recipe table, not a
    measurement of this machine (the progress bar's ETA, once runs finish, is)."""
    from trainscale.sweeps.estimate import duration_text, estimate_sweep

    whole = estimate_sweep(spec)  # every configuration, skipped ones too
    seconds = whole.seconds * runs / whole.runs if whole.runs else 0.0
    return (
        f"about {duration_text(seconds)} on a quiet 2-core machine (training samples, or the "
        "samples to the target of a run that stops there, x the recipe table's fp32 seconds "
        "per sample, docs/workloads.md, plus each run's start-up); "
        "the ETA below is measured here, from the runs done"
    )


class SweepProgress(SweepRunListener):
    """The plan, then a rich progress bar over the sweep's runs, with ETA, and one line per
    finished run; at the end, the summary table."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: Any = None
        self.task: Any = None
        self.steps_task: Any = None
        self.running = False
        """The runs have started (a stop now is one the sweep can resume)."""

    def planning(self) -> Any:
        return self.console.status("checking every configuration (options, cores, data)...")

    def planned(self, spec: SweepSpec, plan: Plan, store: Path) -> None:
        for note in plan.notes():  # soft_wrap: one line, however narrow the terminal
            self.console.print(f"[yellow]{escape(note)}[/]", soft_wrap=True)
        configs = len({p.config_hash for p in plan.runs})
        self.console.print(
            f"[bold]sweep {escape(spec.name)}[/]: {configs} configurations x {spec.repeats} "
            f"repeat(s) = {len(plan.runs)} runs, order {spec.order}, store {escape(str(store))}"
        )
        self.console.print(f"  {planned_time_text(spec, len(plan.runs))}", markup=False)
        self.running = True

    def swept(self, result: SweepResult) -> None:
        from rich.table import Table

        outcome, summary = result.outcome, result.summary
        assert outcome is not None and summary is not None
        short = outcome.sweep_id[:8]
        if outcome.resumed:
            self.console.print(
                f"resumed sweep {short}: {outcome.skipped_done} run(s) were already done"
            )
        table = Table(title=summary.title)
        for header in SUMMARY_HEADERS:
            table.add_column(header)
        for row in summary.rows:
            table.add_row(*row)
        table_console(markup=False).print(uncut(table))  # labels are text, not markup
        self.console.print(
            f"sweep {short}: {len(outcome.completed)} completed, {len(outcome.failed)} failed "
            f"in this attempt. Report: trainscale report --sweep {short} --out DIR"
        )

    def would_resume(self, result: SweepResult) -> None:
        self.console.print(result.would_resume_line(), markup=False)

    def not_resumed(self, why: str) -> None:
        self.console.print(f"[yellow]{escape(why)}[/]", soft_wrap=True)

    def start(self, sweep_id: str, todo: int, done: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        if done:
            self.console.print(f"sweep {sweep_id[:8]}: {done} run(s) already completed, skipped")
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
        )
        self.progress.start()
        self.task = self.progress.add_task(f"sweep {sweep_id[:8]}", total=todo)
        # The run in progress, step by step, under the sweep's bar (its workers write their
        # step count; the sweep reads it: see sweeps/step_watch.py).
        self.steps_task = self.progress.add_task("  steps of this run", total=None)

    def run_started(self, planned) -> None:
        # The description fills a markup template: a label's brackets must stay text.
        label = escape(f"{planned.label} (repeat {planned.repeat})")
        self.progress.update(self.task, description=label)
        self.progress.reset(self.steps_task, total=None)

    def run_step(self, planned, step: int, total: int) -> None:
        self.progress.update(self.steps_task, completed=step, total=total)

    def run_finished(self, planned, result, error) -> None:
        if error is not None:
            self.console.print(
                f"[red]failed[/]: {escape(f'{planned.label} (repeat {planned.repeat}): {error}')}"
            )
        else:
            accuracy = result.get("test_accuracy")
            acc = f", test acc {accuracy:.4f}" if isinstance(accuracy, float) else ""
            stalls = stall_text(result)
            acc += f" ({stalls})" if stalls else ""
            self.console.print(
                f"done: {escape(planned.label)} (repeat {planned.repeat}): "
                f"{result['samples_per_s']:.1f} samples/s{acc}  "
                + escape(f"[{result['run_id'][:8]}]")
            )
        self.progress.advance(self.task)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
