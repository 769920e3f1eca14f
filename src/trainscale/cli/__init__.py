"""The `trainscale` command line: one module per subcommand.

Each subcommand module exposes `add_parser(subparsers)` and `run(args) -> int`. They are
imported explicitly (not discovered) so that `trainscale --help` is cheap and predictable.
"""

from __future__ import annotations

import argparse
import logging
import os
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
from trainscale.errors import TrainscaleError
from trainscale.parallel.interrupts import describe, exit_status, signals_raise

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


def one_line(text: str) -> str:
    """`text` as one terminal line: whitespace runs folded to a space, and any other
    character a terminal would not print as itself (controls, line and record separators,
    escape sequences that a user's input may carry) written as its Python escape."""
    folded = " ".join(text.split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in folded)


class WarningLines(logging.Handler):
    """The library's warnings (e.g. a damaged stored row left out of a listing) as one
    `trainscale: warning: ...` line each on stderr, each said once per command."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.said: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        message = one_line(record.getMessage())
        if message in self.said:
            return
        self.said.add(message)
        # sys.stderr at the time of the warning, not at start-up: tests swap it.
        print(f"trainscale: warning: {message}", file=sys.stderr)


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; a mistake should cost the user one line."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see `{self.prog} --help`)\n")


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
    """Entry point of the console script; returns the process exit status."""
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
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    finally:
        logger.removeHandler(warnings)


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with signals_raise():  # SIGTERM unwinds like Ctrl-C, recording what it stopped
            return int(args.handler(args))
    except TrainscaleError as error:
        # A user mistake: one line, no traceback, non-zero exit.
        print(f"trainscale: error: {one_line(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM: one line, status 128 + N
        print(f"trainscale: {describe(stop)}", file=sys.stderr)
        return exit_status(stop)


def _discard_stdout() -> None:
    """Point standard output at the null device, so that what is still buffered is dropped
    quietly at exit instead of raising BrokenPipeError again (the recipe of Python's
    `signal` documentation)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (captured in tests): nothing is flushed to a pipe at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
