"""`trainscale sweep`: many runs from a TOML spec or a built-in recipe, resumable."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.cli.lines import print_json, stdout_to_stderr
from trainscale.cli.sweep_resume import resume_command
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
    add_json_argument(
        parser,
        help="print the sweep as one JSON object (the plan, what completed and failed, the "
        "configurations and every run) when it ends; progress stays on stderr",
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
        with stdout_to_stderr(args.json):  # stdout carries the JSON document, and only it
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
    if args.json:
        from trainscale.sweeps.document import sweep_document

        print_json(sweep_document(result), indent=2)
    elif result.outcome is None:  # a dry run
        for planned in result.plan.runs:
            options = planned.config.data.workload_options
            given = "".join(f"  -o {key}={value}" for key, value in options.items())
            done = "  (completed: --resume skips it)" if result.done_before(planned) else ""
            print(f"{planned.item:4d}  repeat {planned.repeat}  {planned.label}{given}{done}")
    if result.outcome is None:
        return 0
    if result.report is not None:
        console.print(f"report written to {result.report}")
    # Failed runs are stored and reported; only a sweep where nothing completed fails.
    return 1 if result.nothing_completed else 0
