"""Arguments that several subcommands share, defined once so they read the same everywhere."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainscale.results.store import DEFAULT_STORE_NAME, STORE_ENV_VAR

ArgumentTarget = argparse.ArgumentParser | argparse._ArgumentGroup


def add_store_argument(target: ArgumentTarget, *, as_path: bool = True) -> None:
    """--store PATH: the results database; `as_path=False` keeps it a string."""
    target.add_argument(
        "--store",
        type=Path if as_path else str,
        metavar="PATH",
        help=f"results database (default: ${STORE_ENV_VAR}, else ./{DEFAULT_STORE_NAME})",
    )


def add_json_argument(target: ArgumentTarget) -> None:
    """--json: print the result as one JSON object instead of a table."""
    target.add_argument("--json", action="store_true", help="print the result as one JSON object")
