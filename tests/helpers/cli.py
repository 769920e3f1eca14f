"""Run `trainscale` in-process and read its error; read a `trainscale run` command line back."""

from __future__ import annotations

import shlex

import pytest

from trainscale.cli import build_parser, main
from trainscale.config.cli import options_from_args
from trainscale.config.options import RunOptions


def run_cli(args: list[str]) -> int:
    """main()'s exit status, whether it returns it or argparse exits with it."""
    try:
        return main(args)
    except SystemExit as exit_:
        return int(exit_.code)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The command's stderr, asserted to be exactly one line and no traceback."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


def parse_run_command(command: str) -> RunOptions:
    """The RunOptions that `trainscale run` would build from `command`, through the real
    parser: the inverse of `config.cli.run_command`, so `parse(render(options)) == options`
    can be checked."""
    words = shlex.split(command)
    if words[:2] != ["trainscale", "run"]:
        raise ValueError(f"not a `trainscale run` command: {command!r}")
    return options_from_args(build_parser().parse_args(words[1:]))
