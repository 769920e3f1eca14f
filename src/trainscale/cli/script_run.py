"""`trainscale run SCRIPT.py [options] -- [the script's arguments]`: which kind of run
`trainscale run` makes, the line a script run adds to the result (its data wait, worded by
`reporting/script_notes.py` as `runs show` and reports word it), and the warning of a run
whose ranks disagreed."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import Any

from trainscale.config.cli import options_from_args
from trainscale.errors import ConfigError
from trainscale.reporting.script_notes import (
    INPUT_BOUND_SHARE,
    data_wait_line,
    disagreement_text,
    threads_text,
)

__all__ = ["INPUT_BOUND_SHARE", "data_wait_line", "start"]


def start(args: argparse.Namespace, announce: Callable[[str], None] | None) -> Any:
    """A script run when the target is a script (a `.py` file followed by `--`, or one that
    calls `trainscale.meter()`: `is_script`), else the workload's run; the result as
    `start_run` returns it."""
    from trainscale.runner.launch import start_run
    from trainscale.runner.script_launch import is_script, start_script_run

    if is_script(args.workload, separated=args.script_args is not None):
        script_args = args.script_args or []
        result = start_script_run(
            args.workload,
            script_args,
            options_from_args(args),
            args.store,
            progress=not (args.quiet or args.json),
        )
        for warning in (disagreement_text(result), threads_text(result)):
            if warning:  # the command prints it as one `trainscale: warning:` line
                logging.getLogger("trainscale").warning(
                    "run %s: %s", str(result.get("run_id", ""))[:8], warning
                )
        return result
    if args.script_args:
        raise ConfigError(
            f"arguments after the workload ({' '.join(args.script_args)}) are for a script run: "
            "`trainscale run SCRIPT.py [options] -- [its arguments]`"
        )
    return start_run(
        options_from_args(args), args.store, quiet=args.quiet or args.json, announce=announce
    )
