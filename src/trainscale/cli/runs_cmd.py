"""`trainscale runs`: list, show and export the runs in a results store (one run's sections
are `runs_show.py`, the export `runs_export.py`), list its sweeps and its probes
(`runs_probes.py`), import another store's runs (`runs_import.py`) and delete runs
(`runs_delete.py`)."""

from __future__ import annotations

import argparse
import sys

from trainscale.cli import runs_delete, runs_export, runs_import, runs_probes, runs_show
from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.cli.console import column_table, emit, emit_unsquashed, status_cell, stdout_console
from trainscale.cli.lines import print_json
from trainscale.cli.values import positive_int
from trainscale.reporting import listing as stored
from trainscale.results.schema import RUN_STATUSES

_FILTERS = ("workload", "status", "tag", "limit")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `trainscale runs` and its actions `list`, `show`, `export`, `sweeps`,
    `probes`, `import` and `delete`."""
    parser = subparsers.add_parser(
        "runs",
        help="list, show, export, import and delete stored runs; list sweeps and probes",
        description=(
            "Read the results store: list runs, show one run, export runs (CSV, JSON, MLflow, "
            "TensorBoard), list the stored sweeps and the stored probes of this machine; "
            "import the runs of another store; delete runs."
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

    list_parser = actions.add_parser(
        "list", parents=[filters, store], help="a table of stored runs, newest first"
    )
    add_json_argument(list_parser, help="print the runs as `runs export --format json` writes them")
    list_parser.set_defaults(runs_handler=_list)

    runs_show.add_parser(actions, [store])

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
    add_json_argument(sweeps_parser, help="print every sweep, with its spec and plan, as JSON")
    sweeps_parser.set_defaults(runs_handler=_sweeps)
    runs_probes.add_parser(actions, [store])
    runs_import.add_parser(actions, [store])
    runs_delete.add_parser(actions, [filters, store])
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the chosen `runs` action; returns the exit status."""
    return int(args.runs_handler(args))


def _list(args: argparse.Namespace) -> int:
    filters = {key: getattr(args, key) for key in _FILTERS}
    if args.json:
        stored.export_stored_runs("json", sys.stdout, args.store, **filters)
        return 0
    found = stored.list_runs(args.store, **filters)
    console = stdout_console()
    if not found.records:
        emit(console, found.empty_message)
        return 0
    rows = [
        [status_cell(cell, record.status) if key == "status" else cell for key, cell in row.items()]
        for record, row in zip(found.records, found.rows(), strict=True)
    ]
    emit_unsquashed(console, column_table(console, found.columns, rows))
    return 0


def _sweeps(args: argparse.Namespace) -> int:
    found = stored.list_sweeps(args.store, args.limit)
    if args.json:
        print_json(found.to_dicts(), indent=2)
        return 0
    console = stdout_console()
    if not found.sweeps:
        emit(console, f"no sweeps in {found.store}")
        return 0
    emit_unsquashed(console, column_table(console, stored.SWEEP_COLUMNS, found.rows()))
    return 0
