"""`trainscale recipes`: the built-in studies `trainscale sweep --recipe NAME` can run."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "recipes",
        help="list the built-in studies (run one with `trainscale sweep --recipe NAME`)",
        description="The classic studies of parallel training, as sweeps sized to this "
        "machine. `trainscale sweep --recipe NAME --dry-run` lists the runs of one.",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from trainscale.sweep.recipes import RECIPES

    table = Table(title="trainscale recipes")
    table.add_column("name", no_wrap=True)
    table.add_column("what it runs")
    table.add_column("what it shows")
    for recipe in RECIPES.values():
        table.add_row(recipe.name, recipe.summary, recipe.study)
    Console().print(table)
    return 0
