"""The `trainscale` command line: one module per subcommand.

Each subcommand module exposes `add_parser(subparsers)` and `run(args) -> int`. They are
imported explicitly (not discovered) so that `trainscale --help` is cheap and predictable.
"""

from __future__ import annotations

import argparse
import logging
import sys

from trainscale import __version__
from trainscale.cli import (
    bench_cmd,
    compare_cmd,
    emulate_cmd,
    env_cmd,
    predict_cmd,
    probe_cmd,
    recipes_cmd,
    recommend_cmd,
    report_cmd,
    run_cmd,
    runs_cmd,
    simulate_cmd,
    sweep_cmd,
    workloads_cmd,
)
from trainscale.cli.lines import OneLineErrorParser, WarningLines, discard_stdout, one_line
from trainscale.cli.unknown_args import reject_unrecognized
from trainscale.errors import TrainscaleError, capped_reason
from trainscale.parallel.interrupts import describe, exit_status, signals_raise
from trainscale.runner import exit_deadline

SUBCOMMANDS = (
    env_cmd,
    workloads_cmd,
    run_cmd,
    bench_cmd,
    runs_cmd,
    sweep_cmd,
    recipes_cmd,
    compare_cmd,
    recommend_cmd,
    report_cmd,
    probe_cmd,
    emulate_cmd,
    simulate_cmd,
    predict_cmd,
)


EXIT_BROKEN_PIPE = 141
"""Exit status when standard output is closed early (`trainscale runs export | head -1`):
128 + SIGPIPE, what the shell reports for `cat`, `yes` and other tools that the same pipe
stops, so that `set -o pipefail` scripts see trainscale like any of them. 0 would claim the
whole output was delivered, which it was not."""


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with one sub-parser per subcommand."""
    parser = OneLineErrorParser(
        prog="trainscale",
        description=(
            "Train reference workloads serially and in parallel, measure them under one "
            "honest rule, store every run, and report speedup and accuracy."
        ),
        epilog="Run `trainscale COMMAND --help` for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"trainscale {__version__}")
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=OneLineErrorParser
    )
    for module in SUBCOMMANDS:
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit status.

    Called as the command (no `argv`), the process then exits within the exit deadline
    with that status, whatever threads or exit hooks a workload's code left behind.
    """
    status = _main(argv)
    if argv is None:  # the command's own process, not a caller's (tests, scripts)
        exit_deadline.arm(status)
    return status


def _main(argv: list[str] | None) -> int:
    logger = logging.getLogger("trainscale")
    warnings = WarningLines()
    logger.addHandler(warnings)
    try:
        try:
            return _run(argv)
        finally:
            # Flush here rather than at interpreter exit, so that a reader that has gone
            # away (`| head -1`) is noticed below and not printed as an ignored exception.
            sys.stdout.flush()
    except BrokenPipeError:
        discard_stdout()
        return EXIT_BROKEN_PIPE
    finally:
        logger.removeHandler(warnings)


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    # What follows the first `--` is a script's own (`run SCRIPT.py -- ARGS`): argparse
    # would match it against trainscale's arguments.
    tail = argv[argv.index("--") + 1 :] if "--" in argv else None
    args, extras = parser.parse_known_args(argv if tail is None else argv[: argv.index("--")])
    if extras:
        reject_unrecognized(parser, args, extras, argv)
    if tail is not None:
        if not hasattr(args, "script_args"):
            parser.error(
                "arguments after -- are for a script: `trainscale run|bench|recommend SCRIPT.py`"
            )
        args.script_args = tail
    try:
        with signals_raise():  # SIGTERM unwinds like Ctrl-C, recording what it stopped
            return int(args.handler(args))
    except TrainscaleError as error:
        # A user mistake: one line, no traceback, non-zero exit.
        print(f"trainscale: error: {one_line(capped_reason(str(error)))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM: one line, status 128 + N
        print(f"trainscale: {describe(stop)}", file=sys.stderr)
        return exit_status(stop)
