"""`trainscale recipes`: the built-in studies `trainscale sweep --recipe NAME` can run."""

from __future__ import annotations

import argparse

ESTIMATE_NOTE = (
    "Time: a rough estimate (within about 2x), not a measurement of this machine: each "
    "run's training samples (for a run that stops at its target, the samples its workload "
    "was measured to need) times the seconds per sample measured on a 2-core machine with "
    "1 process x 2 threads (docs/workloads.md), plus {overhead:.0f} s of start-up a run; "
    "evaluation and DBN pre-training are not counted. More cores: less time."
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "recipes",
        help="list the built-in studies (run one with `trainscale sweep --recipe NAME`)",
        description="The classic studies of parallel training, as sweeps sized to this "
        "machine: what each runs, whether it measures accuracy (real data, evaluated) or "
        "throughput only, and roughly how long it takes. `trainscale sweep --recipe NAME "
        "--dry-run` lists the runs of one.",
        epilog="Batch: every setting of a recipe trains a stated global batch (samples per "
        "optimizer step over all workers), split evenly among its workers; scaling and "
        "distributed-accuracy instead fix the per-worker batch, so their global batch grows "
        "with the workers (that growth is what they study). See docs/sweeps.md.",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from trainscale.cli.console import table_console, uncut
    from trainscale.hardware.facts import usable_cores
    from trainscale.sweeps.estimate import (
        RUN_OVERHEAD_S,
        data_needs,
        estimate_sweep,
        measures_accuracy,
    )
    from trainscale.sweeps.recipes import RECIPES, recipe_spec
    from trainscale.sweeps.spec import parse_spec

    cores = usable_cores()
    table = Table(title=f"trainscale recipes (sized for {len(cores)} usable cores)")
    table.add_column("name", no_wrap=True)
    table.add_column("what it runs")
    table.add_column("what it shows")
    table.add_column("accuracy")
    table.add_column("data it needs (here?)")
    table.add_column("runs, time (--quick)")
    missing: list[str] = []
    for recipe in RECIPES.values():
        full, quick = (
            parse_spec(recipe_spec(recipe.name, q, cores), recipe.name) for q in (False, True)
        )
        accuracy = "yes" if measures_accuracy(full) else "no: throughput only"
        sizes = f"{estimate_sweep(full).text()} ({estimate_sweep(quick).text()})"
        needs = data_needs(full)
        data = "; ".join(need.text() for need in needs) or "none (synthetic data)"
        missing += [
            f"{recipe.name}: {need.workload}'s {need.runs} runs are skipped: {need.reason}"
            for need in needs
            if need.status == "missing"
        ]
        table.add_row(recipe.name, recipe.summary, recipe.study, accuracy, data, sizes)
    console = table_console()
    console.print(uncut(table))
    for line in missing:
        console.print(line, markup=False, soft_wrap=True)
    console.print(ESTIMATE_NOTE.format(overhead=RUN_OVERHEAD_S))
    return 0
