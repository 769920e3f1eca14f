"""`trainscale runs`: list, show and export the runs in a results store (the export is
`runs_export.py`), and list its sweeps and its probes (`runs_probes.py`)."""

from __future__ import annotations

import argparse

from rich.text import Text

from trainscale.cli import runs_export, runs_probes
from trainscale.cli.common import add_store_argument
from trainscale.cli.console import (
    column_table,
    emit,
    emit_unsquashed,
    key_value_table,
    status_cell,
    stdout_console,
)
from trainscale.cli.values import positive_int
from trainscale.reporting import listing as stored
from trainscale.results.schema import RUN_STATUSES

_FILTERS = ("workload", "status", "tag", "limit")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `trainscale runs` and its actions `list`, `show`, `export`, `sweeps` and
    `probes`."""
    parser = subparsers.add_parser(
        "runs",
        help="list, show and export stored runs; list stored sweeps and probes",
        description=(
            "Read the results store: list runs, show one run, export runs (CSV, JSON, MLflow, "
            "TensorBoard), list the stored sweeps and the stored probes of this machine."
        ),
    )
    actions = parser.add_subparsers(dest="runs_action", metavar="ACTION", required=True)

    store = argparse.ArgumentParser(add_help=False)
    add_store_argument(store)
    filters = argparse.ArgumentParser(add_help=False)
    filters.add_argument("--workload", metavar="W", help="only runs of this workload")
    filters.add_argument("--status", choices=RUN_STATUSES, help="only runs with this status")
    filters.add_argument("--tag", metavar="T", help="only runs with this tag")
    filters.add_argument(
        "--limit", type=positive_int, metavar="N", help="at most N runs (the newest)"
    )

    actions.add_parser(
        "list", parents=[filters, store], help="a table of stored runs, newest first"
    ).set_defaults(runs_handler=_list)

    show_parser = actions.add_parser(
        "show", parents=[store], help="config, environment, summary and epochs of one run"
    )
    show_parser.add_argument("run_id", metavar="RUN_ID", help="run id, or a unique prefix of it")
    show_parser.set_defaults(runs_handler=_show)

    runs_export.add_parser(actions, [filters, store])

    sweeps_parser = actions.add_parser(
        "sweeps",
        parents=[store],
        help="a table of stored sweeps, newest first",
        description=(
            "The stored sweeps, newest first: id, creation time, name, source (a file or "
            "recipe:NAME) and how many of the planned runs have completed. A sweep id (or a "
            "unique prefix) goes to `trainscale report --sweep`, `trainscale compare` and "
            "`trainscale simulate --validate --sweep`."
        ),
    )
    sweeps_parser.add_argument(
        "--limit", type=positive_int, metavar="N", help="at most N sweeps (the newest)"
    )
    sweeps_parser.set_defaults(runs_handler=_sweeps)
    runs_probes.add_parser(actions, [store])
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the chosen `runs` action; returns the exit status."""
    return int(args.runs_handler(args))


def _list(args: argparse.Namespace) -> int:
    found = stored.list_runs(args.store, **{key: getattr(args, key) for key in _FILTERS})
    console = stdout_console()
    if not found.records:
        emit(console, found.empty_message)
        return 0
    rows = [
        [status_cell(cell, record.status) if key == "status" else cell for key, cell in row.items()]
        for record, row in zip(found.records, found.rows(), strict=True)
    ]
    emit_unsquashed(console, column_table(console, stored.RUN_COLUMNS, rows))
    return 0


def _show(args: argparse.Namespace) -> int:
    details = stored.run_details(args.run_id, args.store)
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


def _sweeps(args: argparse.Namespace) -> int:
    found = stored.list_sweeps(args.store, args.limit)
    console = stdout_console()
    if not found.sweeps:
        emit(console, f"no sweeps in {found.store}")
        return 0
    emit_unsquashed(console, column_table(console, stored.SWEEP_COLUMNS, found.rows()))
    return 0


def _section(name: str) -> Text:
    return Text(f"\n{name}", style="bold")
