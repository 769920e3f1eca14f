"""Placeholder for the `env` subcommand (being written)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("env", help="(being written)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return 0
