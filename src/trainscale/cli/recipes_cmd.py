"""`trainscale recipes`: the built-in studies `trainscale sweep --recipe NAME` can run."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from trainscale.cli.common import add_json_argument
from trainscale.cli.lines import print_json

ESTIMATE_NOTE = (
    "Time: a rough estimate (within about 2x), not a measurement of this machine: each "
    "run's training samples (for a run that stops at its target, the samples its workload "
    "was measured to need) times the seconds per sample measured on a 2-core machine with "
    "1 process x 2 threads (docs/workloads.md), plus {overhead:.0f} s of start-up per run; "
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
    add_json_argument(
        parser,
        help="print the recipes as JSON: what each runs, its data, runs and rough duration",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from trainscale.cli.console import table_console, uncut
    from trainscale.hardware.facts import usable_cores
    from trainscale.sweeps.estimate import RUN_OVERHEAD_S
    from trainscale.sweeps.recipes import RECIPES

    cores = usable_cores()
    recipes = [_describe(name, cores) for name in RECIPES]
    if args.json:
        print_json(recipes, indent=2)
        return 0
    table = Table(title=f"trainscale recipes (sized for {len(cores)} usable cores)")
    table.add_column("name", no_wrap=True)
    for column in ("what it runs", "what it shows", "accuracy", "data it needs (here?)"):
        table.add_column(column)
    table.add_column("runs, time (--quick)")
    missing: list[str] = []
    for recipe in recipes:
        table.add_row(
            recipe["name"],
            recipe["summary"],
            recipe["study"],
            "yes" if recipe["measures_accuracy"] else "no: throughput only",
            "; ".join(need["text"] for need in recipe["data"]) or "none (synthetic data)",
            f"{recipe['size']} ({recipe['quick_size']})",
        )
        missing += [
            f"{recipe['name']}: {need['workload']}'s {need['runs']} runs are skipped: "
            f"{need['reason']}"
            for need in recipe["data"]
            if need["status"] == "missing"
        ]
    console = table_console()
    console.print(uncut(table))
    for line in missing:
        console.print(line, markup=False, soft_wrap=True)
    console.print(ESTIMATE_NOTE.format(overhead=RUN_OVERHEAD_S))
    return 0


def _describe(name: str, cores: list[int]) -> dict[str, Any]:
    """One recipe as plain data: what it runs and shows, whether it measures accuracy, the
    real data it needs (and whether that is here), and its runs and rough duration."""
    from trainscale.sweeps.estimate import data_needs, estimate_sweep, measures_accuracy
    from trainscale.sweeps.recipes import RECIPES, recipe_spec
    from trainscale.sweeps.spec import parse_spec

    recipe = RECIPES[name]
    full, quick = (parse_spec(recipe_spec(name, q, cores), name) for q in (False, True))
    size, quick_size = estimate_sweep(full), estimate_sweep(quick)
    return {
        "name": name,
        "summary": recipe.summary,
        "study": recipe.study,
        "measures_accuracy": measures_accuracy(full),
        "data": [{**asdict(need), "text": need.text()} for need in data_needs(full)],
        "runs": size.runs,
        "estimated_s": round(size.seconds),
        "size": size.text(),
        "quick_runs": quick_size.runs,
        "quick_estimated_s": round(quick_size.seconds),
        "quick_size": quick_size.text(),
    }
