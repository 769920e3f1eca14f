"""`trainscale probe`: measure matmul FLOP/s, per-operator cost and communication; store them."""

from __future__ import annotations

import argparse
import sys

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.cli.lines import print_json
from trainscale.config.cli import add_declared_options, declared_from_args
from trainscale.probing.options import ProbeOptions

EPILOG = """\
examples:
  trainscale probe                      # everything that applies to this machine
  trainscale probe --quick              # small sizes: a smoke test in seconds, not a figure
  trainscale probe --device cpu --threads 4 --only matmul
  trainscale probe --device cuda --workers 8 --only allreduce --json

Stores one row per measurement: runs' MFU is also given against the matmul figure, and
`simulate --cluster local` predicts from both without a run (docs/hardware.md).
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `trainscale probe`."""
    parser = subparsers.add_parser(
        "probe",
        help="measure matmul FLOP/s, per-operator cost, host-device and all-reduce here; store",
        description=(
            "Measure what this machine achieves: square matmuls per precision (best of N), "
            "the cost of one operator in a training step of negligible arithmetic, "
            "host-to-device and device-to-host copies (CUDA, pinned memory), and all-reduce "
            "time over message sizes between worker processes (gloo on the CPU, NCCL on "
            "GPUs) with bus bandwidth and a fitted latency (alpha) and inverse bandwidth "
            "(beta). Each measurement is stored with the machine's facts."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_declared_options(parser, ProbeOptions)
    add_store_argument(parser)
    add_json_argument(parser, help="print the results as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Probe and store; a mistake raises a TrainscaleError (one line, exit 2)."""
    from trainscale.probing.run import ProbeFailed, run_probe
    from trainscale.probing.summary import summary_lines

    options = declared_from_args(ProbeOptions, args)
    say = None if args.json else (lambda message: print(f"probing {message}", file=sys.stderr))
    try:
        result = run_probe(options, args.store, progress=say)
    except ProbeFailed as failure:
        print(f"trainscale: {failure}", file=sys.stderr)
        return 1
    if args.json:
        print_json(result, indent=2)
    else:
        for line in summary_lines(result, quick=args.quick):
            print(line)
    return 0
