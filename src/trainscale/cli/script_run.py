"""`trainscale run SCRIPT.py [options] -- [the script's arguments]`: which kind of run
`trainscale run` makes, and the line a script run adds to the result (its data wait)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from trainscale.config.cli import options_from_args
from trainscale.errors import ConfigError


def start(args: argparse.Namespace, announce: Callable[[str], None] | None) -> Any:
    """A script run when the target is a script (a `.py` file followed by `--`, or one that
    calls `trainscale.meter()`: `is_script`), else the workload's run; the result as
    `start_run` returns it."""
    from trainscale.runner.launch import start_run
    from trainscale.runner.script_launch import is_script, start_script_run

    if is_script(args.workload, separated=args.script_args is not None):
        script_args = args.script_args or []
        return start_script_run(args.workload, script_args, options_from_args(args), args.store)
    if args.script_args:
        raise ConfigError(
            f"arguments after the workload ({' '.join(args.script_args)}) are for a script run: "
            "`trainscale run SCRIPT.py [options] -- [its arguments]`"
        )
    return start_run(
        options_from_args(args), args.store, quiet=args.quiet or args.json, announce=announce
    )


INPUT_BOUND_SHARE = 0.10
"""A data wait above this share of the step time is worth the user's attention: the model
then stands idle for its data on one step in ten or more."""


def data_wait_line(result: dict[str, Any]) -> str | None:
    """'  data wait: 12.0% of the step time (median 3.1 ms a step)' for a script run, with
    what to try when the wait is over `INPUT_BOUND_SHARE` (the script is input-bound)."""
    share = result.get("data_wait_share")
    if share is None:
        return None
    wait_ms = (result.get("data_wait_s_median") or 0.0) * 1000
    line = f"  data wait: {share:.1%} of the step time (median {wait_ms:.1f} ms a step)"
    if share > INPUT_BOUND_SHARE:
        line += (
            ": input-bound, the model waits for its data; try more DataLoader workers "
            "(num_workers), persistent_workers=True, or lighter per-sample transforms"
        )
    return line
