"""The `env` subcommand: show the machine facts that every stored run records."""

from __future__ import annotations

import argparse

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.cli.lines import print_json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `trainscale env [--json]`."""
    parser = subparsers.add_parser(
        "env",
        help="show this machine's CPU, cores, NUMA, bf16 support, GPUs and library versions",
        description=(
            "Show the facts about this machine that every stored run records: CPU model and "
            "flags, usable cores and NUMA layout, memory, native bf16 support, GPUs, library "
            "versions and the git revision of the current directory; the theoretical peaks "
            "MFU is measured against, and beside them the newest full matmul probe of each "
            "device of this host in the results store (`trainscale probe`)."
        ),
    )
    add_store_argument(parser)
    add_json_argument(parser, help="print the facts as one JSON object instead")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the environment as a table (default) or JSON; returns the exit status."""
    # Imported here so that `trainscale --help` does not pay for importing torch.
    from trainscale.reporting.this_machine import describe_machine

    report = describe_machine(args.store)
    if args.json:
        print_json(report.to_dict(), indent=2)
        return 0

    from rich.table import Table

    from trainscale.cli.console import table_console, uncut

    console = table_console()
    for title, rows in (
        ("trainscale environment", report.fact_rows()),
        ("peaks and energy", report.hardware_rows()),
    ):
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column("fact", style="bold")
        table.add_column("value", overflow="fold")
        for fact, value in rows:
            table.add_row(fact, value)
        console.print(uncut(table))
    console.print(report.bf16_summary())
    return 0
