"""`trainscale probe`: measure matmul FLOP/s, per-operator cost and communication; store them."""

from __future__ import annotations

import argparse
import json
import sys

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.cli.values import names, parsed_list, whole_numbers
from trainscale.errors import ConfigError
from trainscale.probe.run import MAX_REPEATS, parse_bytes

BYTE_SIZES = parsed_list(parse_bytes, ConfigError)  # byte sizes by commas: 4K,64K,1M

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
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda", "auto"),
        default="auto",
        help="what to probe (default: auto = cuda when a GPU is visible)",
    )
    parser.add_argument(
        "--only",
        type=names,
        metavar="KINDS",
        help="comma-separated subset of matmul,dispatch,transfer,allreduce (default: all apply)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="intra-op threads of the CPU matmul, 1 to the usable cores (default: every "
        "usable core)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="all-reduce processes, >= 1; on the CPU at most the usable cores unless "
        "--allow-oversubscribe, on CUDA at most the visible GPUs (default: 2 on the CPU, "
        "every visible GPU on CUDA)",
    )
    parser.add_argument(
        "--allow-oversubscribe",
        action="store_true",
        help="start more CPU all-reduce workers than usable cores",
    )
    parser.add_argument(
        "--precisions",
        type=names,
        metavar="LIST",
        help="matmul precisions (default: fp32,bf16 on the CPU; fp32,tf32,bf16,fp16 on CUDA)",
    )
    parser.add_argument(
        "--matmul-sizes",
        type=whole_numbers,
        metavar="N,N,...",
        help="square matmul sizes, each must fit in memory (4 n^2 x 4 bytes) (default: "
        "512,1024,2048 on the CPU, 2048,4096,8192 on CUDA)",
    )
    parser.add_argument(
        "--message-sizes",
        type=BYTE_SIZES,
        metavar="SIZE,...",
        help="all-reduce message sizes, e.g. 4K,64K,1M, at least two; every worker holds "
        "the largest twice, which must fit in memory (default: 4 KiB .. 64 MiB by x4)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        metavar="N",
        help=f"timed batches per size, 1 to {MAX_REPEATS} (default: 5 on the CPU, 10 on "
        "CUDA; --quick 3)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes and few repeats: checks the machinery in seconds (not a figure)",
    )
    parser.add_argument(
        "--timeout",
        dest="timeout_s",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds an all-reduce may wait for a silent worker, > 0 (default: 120)",
    )
    add_store_argument(parser)
    add_json_argument(parser, help="print the results as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Probe and store; a mistake raises a TrainscaleError (one line, exit 2)."""
    from trainscale.probe.run import ProbeFailed, ProbeOptions, run_probe
    from trainscale.probe.summary import summary_lines

    options = ProbeOptions(
        device=args.device,
        only=args.only,
        threads=args.threads,
        workers=args.workers,
        precisions=args.precisions,
        matmul_sizes=args.matmul_sizes,
        message_sizes=args.message_sizes,
        repeats=args.repeats,
        quick=args.quick,
        timeout_s=args.timeout_s,
        allow_oversubscribe=args.allow_oversubscribe,
    )
    say = None if args.json else (lambda message: print(f"probing {message}", file=sys.stderr))
    try:
        result = run_probe(options, args.store, progress=say)
    except ProbeFailed as failure:
        print(f"trainscale: {failure}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for line in summary_lines(result, quick=args.quick):
            print(line)
    return 0
