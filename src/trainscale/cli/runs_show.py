"""`trainscale runs show RUN_ID`: everything stored about one run, as sections of key/value
lines (config, environment, summary, epochs), or as its JSON object."""

from __future__ import annotations

import argparse

from rich.text import Text

from trainscale.cli.common import add_json_argument
from trainscale.cli.console import (
    column_table,
    emit,
    emit_unsquashed,
    key_value_table,
    status_cell,
    stdout_console,
)
from trainscale.cli.lines import print_json
from trainscale.reporting import listing as stored


def add_parser(actions: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """Register `runs show` under `runs`; `parents` give --store."""
    parser = actions.add_parser(
        "show", parents=parents, help="config, environment, summary and epochs of one run"
    )
    parser.add_argument("run_id", metavar="RUN_ID", help="run id, or a unique prefix of it")
    add_json_argument(
        parser, help="print the run as `runs export --format json` writes it, one object"
    )
    parser.set_defaults(runs_handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the run's sections, or its JSON object; exit status 0."""
    details = stored.run_details(args.run_id, args.store)
    if args.json:
        print_json(details.to_dict(), indent=2)
        return 0
    record = details.record
    console = stdout_console()
    emit(console, Text(f"run {record.run_id} ") + status_cell(details.status, record.status))
    emit(console, key_value_table(console, details.overview()))
    if record.error:
        emit(console, _section("error"), Text(record.error, style="red"))
    if record.data_kind == "synthetic":
        emit(console, Text("synthetic data: accuracy and loss figures measure nothing"))
    if record.summary:
        emit(console, _section("summary"), key_value_table(console, details.summary()))
    if details.epochs:
        emit(console, _section("epochs"))
        emit_unsquashed(console, column_table(console, *details.epoch_table()))
    for name, values in details.sections().items():
        table = key_value_table(console, values) if values else "(not recorded)"
        emit(console, _section(name), table)
    return 0


def _section(name: str) -> Text:
    return Text(f"\n{name}", style="bold")
