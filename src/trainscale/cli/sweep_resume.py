"""The command that continues a stopped sweep, as `trainscale sweep` prints it when Ctrl-C
or SIGTERM stops one: the same source and options, plus --resume."""

from __future__ import annotations

import argparse
import shlex


def resume_command(args: argparse.Namespace) -> str:
    """The command that continues this sweep: the same source and options, plus --resume."""
    words = ["trainscale", "sweep"]
    words += ["--recipe", args.recipe] if args.recipe is not None else [str(args.file)]
    if args.quick:
        words.append("--quick")
    options = (
        ("--store", args.store),
        ("--data-dir", args.data_dir),
        ("--data", args.data),
        ("--report", args.report),
    )
    for flag, value in options:
        if value is not None:
            words += [flag, str(value)]
    for key, value in dict(args.workload_options or {}).items():
        words += ["-o", f"{key}={value}"]
    return shlex.join([*words, "--resume"])
