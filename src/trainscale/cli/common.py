"""Arguments that several subcommands share, declared once so they read the same everywhere.

The run options are not here: they are declared in config/options.py and added with
`config.cli.add_option_arguments`. These are the commands' own arguments (where results go,
how they are printed); `cli.values` has the types of their values.
"""

from __future__ import annotations

import argparse
from typing import get_args

from trainscale.cli.values import given_file_path, given_file_path_text, given_path
from trainscale.results.store import DEFAULT_STORE_NAME, STORE_ENV_VAR

ArgumentTarget = argparse.ArgumentParser | argparse._ArgumentGroup


def add_store_argument(target: ArgumentTarget, *, as_path: bool = True) -> None:
    """--store PATH: the results database; `as_path=False` keeps it a string."""
    target.add_argument(
        "--store",
        # Not empty: an empty --store (an unset shell variable) fell back to the default.
        type=given_file_path if as_path else given_file_path_text,
        metavar="PATH",
        help=f"results database (default: ${STORE_ENV_VAR}, else ./{DEFAULT_STORE_NAME})",
    )


def add_json_argument(
    target: ArgumentTarget, help: str = "print the result as one JSON object"
) -> None:
    """--json: print the result as JSON instead of a table (`help` says what is printed)."""
    target.add_argument("--json", action="store_true", help=help)


def add_quiet_argument(target: ArgumentTarget) -> None:
    """--quiet: no progress output (the result is still printed)."""
    target.add_argument("--quiet", action="store_true", help="no progress output")


def add_data_choice_argument(target: ArgumentTarget, help: str) -> None:
    """--data auto|real|synthetic of commands that measure many runs (`run.data_choice`)."""
    from trainscale.runner.data_choice import DataChoice

    target.add_argument("--data", choices=get_args(DataChoice), default="auto", help=help)


def add_plot_argument(target: ArgumentTarget) -> None:
    """--plot DIR: where the PNG plots go."""
    target.add_argument("--plot", type=given_path, metavar="DIR", help="write PNG plots into DIR")
