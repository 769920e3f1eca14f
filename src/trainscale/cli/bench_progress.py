"""The bench's progress on stderr, as `trainscale bench` prints it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.markup import escape

from trainscale.benchmark.run import BenchListener

if TYPE_CHECKING:
    from rich.console import Console

    from trainscale.benchmark import BenchResult, Rung
    from trainscale.hardware.contention import OtherProcess


class Progress(BenchListener):
    """The bench's progress on stderr: the plan, a rule per rung, failures."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.rounds_start: float | None = None
        """When the first round started: the time left is estimated from the rounds done."""
        self.bench_id: str | None = None
        """The bench's id once it started measuring (its runs' tag is `bench:ID`)."""

    def data_note(self, note: str) -> None:
        # One line however narrow the terminal: it is the first thing a bench says.
        self.console.print(note, style="bold red", soft_wrap=True, markup=False)

    def started(self, result: BenchResult, runnable: int) -> None:
        self.bench_id = result.bench_id
        env = result.env
        self.console.print(
            f"[bold]trainscale bench {result.bench_id}[/]: "
            + escape(f"{result.workload}{result.in_framework}, {env['cpu_model']}, ")
            + f"{len(env['usable_cores'])} usable cores, {runnable} settings "
            f"x {result.rounds} rounds x {result.steps_per_run} steps, "
            f"{result.batch_text}, data {result.options.data.kind}"
        )

    def round_started(self, index: int, rounds: int, order: list[Rung]) -> None:
        now = time.monotonic()
        if self.rounds_start is None:
            self.rounds_start = now
        left = ""
        if index > 1:
            from trainscale.sweeps.estimate import duration_text

            # Measured on this machine, as it is now (busy or not): the rounds so far.
            per_round = (now - self.rounds_start) / (index - 1)
            left = (
                f" (rounds here take {per_round:.0f} s each: about "
                f"{duration_text(per_round * (rounds - index + 1))} of rounds left)"
            )
        self.console.print(f"[bold]round {index}/{rounds}[/]{left}")

    def rung_started(self, index: int, total: int, rung: Rung) -> None:
        self.console.rule(f"[{index}/{total}] {rung.name}")

    def rung_failed(self, rung: Rung, error: str) -> None:
        # A failure's text is the library's or the script's: its brackets are not markup.
        self.console.print(f"[red]{escape(f'{rung.name} failed: {error}')}[/]")

    def busy_round(self, result: BenchResult, busiest: list[OtherProcess], again: bool) -> None:
        self.console.print(result.busy_round_line(busiest, again), style="yellow", markup=False)

    def full_recipe_started(self, fastest: Rung) -> None:
        self.console.rule(f"full recipe on the fastest setting: {fastest.name}")
