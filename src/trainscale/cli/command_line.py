"""Read a `trainscale run` command line back into RunOptions: the inverse of
`config.cli.run_command`, through the real parser, so `parse(render(options)) == options`
holds by construction (tests check it)."""

from __future__ import annotations

import shlex

from trainscale.config.options import RunOptions


def parse_run_command(command: str) -> RunOptions:
    """The RunOptions that `trainscale run` would build from `command`."""
    from trainscale.cli import build_parser
    from trainscale.config.cli import options_from_args

    words = shlex.split(command)
    if words[:2] != ["trainscale", "run"]:
        raise ValueError(f"not a `trainscale run` command: {command!r}")
    return options_from_args(build_parser().parse_args(words[1:]))
