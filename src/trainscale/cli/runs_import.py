"""`trainscale runs import`: the runs, sweeps and probes of another results store copied into
this one, so that one report or comparison sees runs made on several machines."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainscale.cli.common import add_json_argument
from trainscale.cli.lines import print_json
from trainscale.cli.values import given_path

EPILOG = """\
examples:
  trainscale runs import gpu-server.db                 # into ./trainscale.db (or $TRAINSCALE_STORE)
  trainscale runs import node1.db --store cluster.db   # gather each node's store into one
  trainscale report --runs LAPTOP_RUN GPU_RUN --out report/   # then report them together
"""


def add_parser(actions: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """Register `runs import` under `runs`; `parents` give --store."""
    parser = actions.add_parser(
        "import",
        parents=parents,
        help="copy the runs, sweeps and probes of another results store into this one",
        description=(
            "Copy the runs of another results store (a copy of another machine's "
            "trainscale.db, say) into this one, with their epochs and step times, and its "
            "sweeps and probes, each row as stored: then reports, comparisons and the "
            "simulator see the runs of both machines. Runs the store already holds (the same "
            "id) are left as they are, so importing twice copies nothing twice; runs still "
            "running there are left out. All of it is copied, or nothing is."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", type=given_path, metavar="SOURCE", help="the store to copy from")
    add_json_argument(parser, help="print what was copied and left as one JSON object")
    parser.set_defaults(runs_handler=run)


def run(args: argparse.Namespace) -> int:
    """Copy, then say what was copied and what was left; a mistake is one line (exit 2)."""
    from trainscale.results.store import RunStore, default_store_path
    from trainscale.results.store_import import check_source

    store: Path = args.store if args.store is not None else default_store_path()
    check_source(Path(args.source), store)  # before the store is made: a typo makes none
    with RunStore(store) as opened:
        imported = opened.import_from(args.source)
    if args.json:
        print_json(imported.to_dict(), indent=2)
        return 0
    print(
        f"imported {imported.runs} run(s), {imported.sweeps} sweep(s) and {imported.probes} "
        f"probe(s) from {imported.source} into {imported.store}"
    )
    if imported.completed_failed:
        print(
            f"  {imported.completed_failed} run(s) stored failed in {imported.store} completed "
            f"from {imported.source} (their results, saved there)"
        )
    if imported.already_there:
        print(f"  {imported.already_there} run(s) already in {imported.store}: left as they were")
    if imported.still_running:
        print(
            f"  {imported.still_running} run(s) still running in {imported.source}: left out "
            "(import again once they have ended)"
        )
    return 0
