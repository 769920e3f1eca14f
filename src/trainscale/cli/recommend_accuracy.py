"""The accuracy check's arguments of `trainscale recommend`: a workload's short runs on real
data, and a script's whole runs (`--check-accuracy`)."""

from __future__ import annotations

import argparse

from trainscale.cli.common import add_data_choice_argument


def add_accuracy_arguments(parser: argparse.ArgumentParser) -> None:
    """--data, --accuracy-epochs, --accuracy-tolerance and --check-accuracy, as a group."""
    acc = parser.add_argument_group("accuracy check")
    add_data_choice_argument(
        acc,
        help="real data for the accuracy check; auto = real when found, else skip the check "
        "with a warning; synthetic = skip it (default: auto); a script's: what it trains on",
    )
    acc.add_argument(
        "--accuracy-epochs",
        type=float,
        metavar="E",
        help="length of the accuracy runs in epochs, > 0 (default: 0.25; --quick 0.1)",
    )
    acc.add_argument(
        "--accuracy-tolerance",
        type=float,
        metavar="POINTS",
        help="reject a finalist whose test accuracy is more than this many percentage points "
        "(0 to 100) below the baseline's (default: 0.5); a script's with --check-accuracy",
    )
    acc.add_argument(
        "--check-accuracy",
        action="store_true",
        help="a script: after the search, run the WHOLE script (to its own end, with its own "
        "arguments: make it short with them, e.g. -- --epochs 1) in the serial baseline, "
        "then in the finalists best first until one's final accuracy (its last "
        "meter.evaluate) is within --accuracy-tolerance of the baseline's; these runs are "
        "not bounded by --budget-s (default: throughput only)",
    )
