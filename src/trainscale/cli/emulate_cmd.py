"""`trainscale emulate WORKLOAD`: the accuracy of N workers, emulated in one process."""

from __future__ import annotations

import argparse
import sys

from trainscale.cli.common import add_json_argument, add_quiet_argument, add_store_argument
from trainscale.cli.emulate_progress import Progress
from trainscale.cli.lines import print_json, stdout_to_stderr
from trainscale.config.cli import (
    add_declared_options,
    add_option_arguments,
    declared_from_args,
    options_from_args,
)
from trainscale.emulation.options import EmulationOptions
from trainscale.emulation.run import EMULATED_OPTIONS

EPILOG = """\
examples:
  trainscale emulate mnist-cnn --workers 1,2,4,8 --mode sync --lr-scaling linear --epochs 1
  trainscale emulate mnist-cnn --workers 1,2,4,8 --mode async --staleness-spread 0.5
  trainscale emulate mnist-cnn --workers 2,4,8 --mode local-sgd --local-steps 8

Each N is one stored run (world size 1: it ran in one process) tagged emulate:<id>, with the
emulation in its summary. A global step is one update of the global model: one global
batch (sync), one worker's gradient (async), one local step of every replica (local-sgd).
Steps to target are counted at the evaluations (every --eval-every global steps and at every
epoch's end). Emulation reproduces the optimisation only: no communication, no timing of N
workers (see docs/emulation.md).
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `trainscale emulate`."""
    parser = subparsers.add_parser(
        "emulate",
        help="emulate the accuracy of N data-parallel workers (sync, async, local SGD) in "
        "one process, and store each N as a run",
        description="Train a workload in one process the way N workers would optimise it: "
        "synchronous SGD (global batch of N workers, lr scaling and warm-up), asynchronous "
        "parameter-server SGD (stale gradients), or local SGD (H local steps, then "
        "averaging). Reports accuracy by epoch, final accuracy, and steps and samples to the "
        "target accuracy for each N.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("workload", help="workload name (see `trainscale workloads`)")
    emu = parser.add_argument_group("emulation")
    add_declared_options(emu, EmulationOptions)

    add_option_arguments(
        parser,
        only=EMULATED_OPTIONS,
        help_overrides={
            "lr_scaling": "scale the lr with the samples of a global step over the reference "
            "batch; a scaled-up lr gets a warm-up of at least 10% of the steps",
            "steps": "global optimizer steps, >= 1 (instead of epochs)",
            "eval_every": "evaluate every STEPS (>= 1) global steps, and at every epoch's end "
            "(default: 4 times an epoch)",
            "data": "real only: emulation is about accuracy (synthetic is refused)",
        },
    )
    out = parser.add_argument_group("output")
    add_store_argument(out, as_path=False)
    add_json_argument(out, help="print the results as one JSON object")
    add_quiet_argument(out)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Emulate every N in turn, store each as a run, print the table (or JSON)."""
    from trainscale.emulation.run import EmulationFailed, run_emulation

    quiet = args.quiet or args.json
    try:
        with stdout_to_stderr(args.json):  # stdout carries the JSON document, and only it
            result = run_emulation(
                options_from_args(args),
                declared_from_args(EmulationOptions, args),
                store=args.store,
                progress=not quiet,
                listener=None if quiet else Progress(),
            )
    except EmulationFailed as failed:  # stored failed with why: a failed run, not a mistake
        print(f"trainscale: {failed}", file=sys.stderr)
        return 1
    if args.json:
        print_json(result.to_dict())
    else:
        print("\n".join(result.table_lines()))
        print(f"report: {result.report_command}")
    return 0
