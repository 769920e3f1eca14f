"""`trainscale sweep`: many runs from a TOML spec or a built-in recipe, resumable."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from trainscale.cli.common import add_store_argument
from trainscale.cli.values import given_path
from trainscale.config.cli import add_option_arguments
from trainscale.parallel.interrupts import describe, exit_status

EPILOG = """\
examples:
  trainscale sweep my-sweep.toml                 # run a sweep file (see docs/sweeps.md)
  trainscale sweep my-sweep.toml --resume        # continue it after Ctrl-C, a crash or kill -9
  trainscale sweep --recipe cpu-parallel --quick # a built-in study (`trainscale recipes`)
  trainscale sweep --recipe cpu-parallel -o file=tweets.csv  # a workload option (-o as in run)
  trainscale sweep my-sweep.toml --dry-run       # check it and list the planned runs
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run a grid of configurations (a TOML file or a built-in recipe), resumable",
        description=(
            "Run every configuration of a sweep, one run at a time (so no run disturbs "
            "another's timing), each repeated as asked, and store them all under one sweep "
            "id. A failed run is stored as failed and the sweep goes on. The whole sweep is "
            "checked before the first run starts."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("file", nargs="?", type=Path, help="sweep spec (TOML)")
    source.add_argument("--recipe", metavar="NAME", help="a built-in study (`trainscale recipes`)")
    parser.add_argument(
        "--quick", action="store_true", help="with --recipe: a scaled-down version of the study"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the newest sweep made from the same spec: completed runs are skipped",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="check the spec and list the planned runs"
    )
    add_store_argument(parser)
    parser.add_argument(
        "--report",
        type=given_path,
        metavar="DIR",
        help="write the sweep's report (Markdown, CSV, HTML with plots) to DIR afterwards; "
        "DIR must be a writable directory or creatable (checked before the first run)",
    )
    # Given on the command line, these replace the sweep's own for every run.
    add_option_arguments(
        parser,
        only=("data", "data_dir", "workload_options"),
        defaults={"data": None},
        help_overrides={
            "data": "override the data of every run (synthetic: throughput only, no accuracy)",
            "workload_options": "a workload option added to the base run, repeatable (see "
            "`trainscale workloads`); in a sweep of several workloads it applies to those "
            "that have it, and a key none of them has is refused",
        },
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trainscale.cli.sweep_progress import SweepProgress
    from trainscale.sweeps.run import load_sweep, run_sweep

    console = Console(stderr=True, highlight=False)
    spec, source = load_sweep(
        args.file,
        recipe=args.recipe,
        quick=args.quick,
        data=args.data,
        data_dir=args.data_dir,
        workload_options=dict(args.workload_options or {}),
    )
    progress = SweepProgress(console)
    try:
        result = run_sweep(
            spec,
            source,
            store=args.store,
            resume=args.resume,
            report=args.report,
            dry_run=args.dry_run,
            listener=progress,
        )
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: the run in progress is recorded
        if not progress.running:
            raise
        # Plain print, not the console: rich would wrap a long command over two lines.
        print(
            f"trainscale: sweep {spec.name}: {describe(stop)}; continue it with: "
            f"{resume_command(args)}",
            file=sys.stderr,
        )
        return exit_status(stop)
    if result.outcome is None:  # a dry run
        for planned in result.plan.runs:
            options = planned.config.data.workload_options
            given = "".join(f"  -o {key}={value}" for key, value in options.items())
            print(f"{planned.item:4d}  repeat {planned.repeat}  {planned.label}{given}")
        return 0
    if result.report is not None:
        console.print(f"report written to {result.report}")
    # Failed runs are stored and reported; only a sweep where nothing completed fails.
    return 1 if result.nothing_completed else 0


def resume_command(args: argparse.Namespace) -> str:
    """The command that continues this sweep: the same source and options, plus --resume."""
    words = ["trainscale", "sweep"]
    words += ["--recipe", args.recipe] if args.recipe is not None else [str(args.file)]
    if args.quick:
        words.append("--quick")
    options = (
        ("--store", args.store),
        ("--data-dir", args.data_dir),
        ("--data", args.data),
        ("--report", args.report),
    )
    for flag, value in options:
        if value is not None:
            words += [flag, str(value)]
    for key, value in dict(args.workload_options or {}).items():
        words += ["-o", f"{key}={value}"]
    return shlex.join([*words, "--resume"])
