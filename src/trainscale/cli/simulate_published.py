"""`trainscale simulate --fit-to TABLE` and `--validate-published`: the simulator against
published scaling tables (docs/published-scaling.md), printed as tables or JSON."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from trainscale.cli.lines import print_json
from trainscale.cli.simulate_output import print_result, print_table
from trainscale.cli.values import positive_ints
from trainscale.config.cli import refuse_given
from trainscale.errors import ConfigError
from trainscale.simulator.options import MonteCarloOptions


def add_published_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "published scaling", "fit the simulator on part of a published table, predict the rest"
    )
    group.add_argument(
        "--fit-to",
        metavar="TABLE",
        help="a published table (`trainscale simulate --list-published`) or a table TOML file",
    )
    group.add_argument(
        "--fit-devices",
        type=positive_ints,
        metavar="N,N,...",
        help="with --fit-to: the device counts whose points the fit uses (default: the "
        "table's own split)",
    )
    group.add_argument(
        "--validate-published",
        action="store_true",
        help="fit every shipped table on its split and report the error on the other points",
    )
    group.add_argument(
        "--list-published", action="store_true", help="list the shipped published tables"
    )


def run_published(
    args: argparse.Namespace, monte_carlo: MonteCarloOptions, *, unused: Sequence[Any]
) -> int | None:
    """Handle the published-table options; None when none was given. The options in
    `unused` (the step model, the scaling) do not apply to a published table: one given is
    refused."""
    if not (args.fit_to or args.validate_published or args.list_published):
        if args.fit_devices:
            raise ConfigError("--fit-devices goes with --fit-to TABLE")
        return None
    if args.workload or args.validate or args.list_clusters:
        raise ConfigError(
            "--fit-to, --validate-published and --list-published take no WORKLOAD and go "
            "without --validate and --list-clusters (a table names its model and system)"
        )
    for options in unused:
        refuse_given(options, None, "does not apply to a published table (it names its system)")
    if args.list_published:
        return _list(args.json)
    from trainscale.simulator.published_run import fit_published, validate_published

    common = {"samples": monte_carlo.samples, "seed": monte_carlo.seed, "plot_dir": args.plot}
    if args.validate_published:
        if args.fit_to or args.fit_devices:
            raise ConfigError("--validate-published fits every table on its own split")
        result = validate_published(**common)
    else:
        result = fit_published(args.fit_to, fit_devices=args.fit_devices, **common)
    return print_result(result, args.json)


def _list(as_json: bool) -> int:
    from trainscale.simulator.published import load_all

    tables = load_all()
    if as_json:
        keys = ("name", "system", "model", "precision", "framework", "data", "source", "fit")
        records = [
            {**{key: getattr(t, key) for key in keys}, "devices": [p.devices for p in t.points]}
            for t in tables
        ]
        print_json(records)
        return 0
    rows = [
        [
            t.name,
            t.model,
            t.system,
            t.precision,
            ",".join(str(p.devices) for p in t.points),
            ",".join(map(str, t.fit)) or "-",
        ]
        for t in tables
    ]
    print_table(
        "published scaling tables (`--fit-to NAME`; sources: --json, docs/published-scaling.md)",
        ["name", "model", "system", "precision", "devices", "fit on"],
        rows,
    )
    return 0
