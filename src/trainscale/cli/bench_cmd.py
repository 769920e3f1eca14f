"""`trainscale bench`: the main job. A ladder of CPU settings, measured, stored, tabulated."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from trainscale.benchmark.run import (
    DEFAULT_OUT,
    DEFAULT_ROUNDS,
    DEFAULT_STEPS,
    QUICK_ROUNDS,
    QUICK_STEPS,
    BenchListener,
)
from trainscale.cli.common import add_data_choice_argument, add_store_argument
from trainscale.config.cli import add_option_arguments

if TYPE_CHECKING:
    from rich.console import Console

    from trainscale.benchmark import BenchResult, Rung


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="the main job: compare serial, threaded, pinned data-parallel and naive settings",
        description=(
            "Train a workload through a ladder of settings on this machine: 1 core fp32 serial "
            "(the baseline), 1 process with all cores as threads, N pinned workers, the same "
            "in bf16 where the CPU has native bf16, and a naive unpinned oversubscribed DDP run "
            "(the pitfall). Every rung trains the same global batch (the recipe's samples per "
            "optimizer step, split evenly among the rung's workers), so speedups compare like "
            "with like. The rungs run in short rounds, each rung once a round in rotated order, "
            "and each speedup is the median of the ratios to the serial run within a round, "
            "with a 95% interval over rounds. Then the fastest setting trains the full recipe "
            "for accuracy and time to target. Every run is stored; the table is printed and "
            "written as Markdown."
        ),
        epilog="About 5 minutes on a 2-core machine; --quick takes about 1 minute. Without "
        "real data (auto) the bench measures synthetic data, throughput only, and says so in "
        "its first line; give it MNIST with --data-dir DIR or TRAINSCALE_DATA_DIR=DIR.",
    )
    parser.add_argument("--workload", default="mnist-cnn", help="workload (default: mnist-cnn)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_STEPS} steps a rung in {QUICK_ROUNDS} rounds and no full-recipe accuracy run",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help="rounds to split each rung's steps over, every rung once a round (default: "
        f"{DEFAULT_ROUNDS}; --quick {QUICK_ROUNDS}); more rounds, a narrower interval",
    )
    add_data_choice_argument(
        parser, help="auto = real data when found, else synthetic with a warning"
    )
    add_option_arguments(
        parser,
        only=("framework", "steps", "data_dir", "download"),
        help_overrides={
            "steps": f"training steps per throughput rung over all rounds, a whole number >= 1 "
            f"(default: {DEFAULT_STEPS}; --quick {QUICK_STEPS})"
        },
    )
    add_store_argument(parser, as_path=False)
    parser.add_argument(
        "--out",
        metavar="FILE",
        default=DEFAULT_OUT,
        help="where to write the Markdown table, in an existing writable directory "
        f"(default: {DEFAULT_OUT})",
    )
    parser.set_defaults(handler=run)


class Progress(BenchListener):
    """The bench's progress on stderr: the plan, a rule per rung, failures."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def data_note(self, note: str) -> None:
        # One line however narrow the terminal: it is the first thing a bench says.
        self.console.print(note, style="bold red", soft_wrap=True, markup=False)

    def started(self, result: BenchResult, runnable: int) -> None:
        env = result.env
        self.console.print(
            f"[bold]trainscale bench {result.bench_id}[/]: {result.workload}{result.in_framework}, "
            f"{env['cpu_model']}, {len(env['usable_cores'])} usable cores, {runnable} settings "
            f"x {result.rounds} rounds x {result.steps_per_run} steps, global batch "
            f"{result.global_batch_size}, data {result.options.data.kind}"
        )

    def round_started(self, index: int, rounds: int, order: list[Rung]) -> None:
        self.console.print(f"[bold]round {index}/{rounds}[/]")

    def rung_started(self, index: int, total: int, rung: Rung) -> None:
        self.console.rule(f"[{index}/{total}] {rung.name}")

    def rung_failed(self, rung: Rung, error: str) -> None:
        self.console.print(f"[red]{rung.name} failed: {error}[/]")

    def full_recipe_started(self, fastest: Rung) -> None:
        self.console.rule(f"full recipe on the fastest setting: {fastest.name}")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from trainscale.benchmark import run_bench
    from trainscale.cli.console import emit, stdout_console

    console = Console(stderr=True)
    result = run_bench(
        args.workload,
        framework=args.framework,
        data=args.data,
        data_dir=args.data_dir,
        download=args.download,
        steps=args.steps,
        rounds=args.rounds,
        quick=args.quick,
        store=args.store,
        out=args.out,
        listener=Progress(console),
    )
    rows = result.rows
    table = Table(title=result.title)
    headers = [h for h in rows[0] if h != "note"]
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(row[h] for h in headers))
    out = stdout_console()  # piped: whole rows, no wrapping at 80 columns
    emit(out, table)
    # Notes go under the table: in a column they would fold it beyond reading on 80 columns.
    for row in rows:
        if row["note"]:
            out.print(f"  {row['setting']}: {row['note']}")
    for line in result.pitfall_lines:
        out.print(f"  {line}")
    console.print(f"table written to {result.out}")
    # Partial failures are in the table and the store; only "nothing ran" fails the command.
    return 1 if result.all_failed else 0
