"""`trainscale runs probes`: the stored measurements of `trainscale probe`, newest first."""

from __future__ import annotations

import argparse

from trainscale.cli.common import add_json_argument
from trainscale.cli.console import column_table, emit, emit_unsquashed, stdout_console
from trainscale.cli.lines import print_json
from trainscale.cli.values import positive_int
from trainscale.probing.options import KINDS


def add_parser(actions: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """Register `runs probes` under `runs`; `parents` give --store."""
    parser = actions.add_parser(
        "probes",
        parents=parents,
        help="a table of stored probes of this machine's figures, newest first",
        description=(
            "The measurements `trainscale probe` stored, newest first: id, creation time, "
            "kind, device, host, the headline figures (matmul FLOP/s per precision, the cost "
            "of one operator, host-device copies, the all-reduce's alpha and bandwidth) and "
            "a note where a probe is no yardstick: 'quick' (a smoke test's sizes; runs' MFU "
            "and the simulator pass it over) or 'busy' (other work used the cores while it "
            "measured; the simulator passes it over). See docs/hardware.md."
        ),
    )
    parser.add_argument("--kind", choices=KINDS, help="only probes of this kind")
    parser.add_argument(
        "--limit", type=positive_int, metavar="N", help="at most N probes (the newest)"
    )
    add_json_argument(parser, help="print every probe, with its stored result, as JSON")
    parser.set_defaults(runs_handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the stored probes; exit status 0, also when there are none."""
    from trainscale.reporting.probe_list import PROBE_COLUMNS, list_probes

    found = list_probes(args.store, kind=args.kind, limit=args.limit)
    if args.json:
        print_json(found.to_dicts(), indent=2)
        return 0
    console = stdout_console()
    if not found.probes:
        emit(console, found.empty_message)
        return 0
    emit_unsquashed(console, column_table(console, PROBE_COLUMNS, found.rows()))
    return 0
