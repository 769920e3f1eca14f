"""`trainscale probe`: measure this machine's matmul FLOP/s and communication, and store them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trainscale.cli.common import add_store_argument
from trainscale.probe.run import MAX_REPEATS

EPILOG = """\
examples:
  trainscale probe                      # everything that applies to this machine
  trainscale probe --quick              # small sizes: a smoke test in seconds, not a figure
  trainscale probe --device cpu --threads 4 --only matmul
  trainscale probe --device cuda --workers 8 --only allreduce --json

Stores one row per measurement in the results store; a run's MFU is then also given against
the matmul figure of its machine (mfu_vs_probe). See docs/hardware.md.
"""


def _positive_ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers like 512,1024, got {text!r}"
        ) from None


def _byte_sizes(text: str) -> tuple[int, ...]:
    from trainscale.errors import ConfigError
    from trainscale.probe.run import parse_bytes

    try:
        return tuple(parse_bytes(part) for part in text.split(",") if part.strip())
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `trainscale probe`."""
    parser = subparsers.add_parser(
        "probe",
        help="measure matmul FLOP/s, host-device and all-reduce bandwidth here, and store them",
        description=(
            "Measure what this machine achieves: square matmuls per precision (best of N), "
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
        type=_names,
        metavar="KINDS",
        help="comma-separated subset of matmul,transfer,allreduce (default: all that apply)",
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
        type=_names,
        metavar="LIST",
        help="matmul precisions (default: fp32,bf16 on the CPU; fp32,tf32,bf16,fp16 on CUDA)",
    )
    parser.add_argument(
        "--matmul-sizes",
        type=_positive_ints,
        metavar="N,N,...",
        help="square matmul sizes, each must fit in memory (4 n^2 x 4 bytes) (default: "
        "512,1024,2048 on the CPU, 2048,4096,8192 on CUDA)",
    )
    parser.add_argument(
        "--message-sizes",
        type=_byte_sizes,
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
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Probe and store; a mistake raises a TrainscaleError (one line, exit 2)."""
    from trainscale.probe.run import ProbeFailed, ProbeOptions, execute_probe, plan_probe

    plan = plan_probe(
        ProbeOptions(
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
    )
    say = None if args.json else (lambda message: print(f"probing {message}", file=sys.stderr))
    try:
        result = execute_probe(plan, args.store, progress=say)
    except ProbeFailed as failure:
        print(f"trainscale: {failure}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for line in summary_lines(result, quick=args.quick):
            print(line)
    return 0


def _rate(flops_per_s: float) -> str:
    if flops_per_s >= 1e12:
        return f"{flops_per_s / 1e12:.2f} TFLOP/s"
    return f"{flops_per_s / 1e9:.1f} GFLOP/s"


def _bandwidth(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:.2f} GB/s"


def summary_lines(result: dict[str, Any], quick: bool = False) -> list[str]:
    """The human-readable account of a probe."""
    from trainscale.probe.run import format_bytes

    lines = [f"probe of {result['device_type']} '{result['device']}' on host {result['host']}"]
    if quick:
        lines.append("(--quick: small sizes; these figures check the machinery, not the machine)")
    matmul = result.get("matmul")
    if matmul:
        threads = f", {matmul['threads']} thread(s)" if matmul.get("threads") else ""
        lines.append(f"matmul (best of {matmul['repeats']}{threads}):")
        for precision, figures in matmul["precisions"].items():
            peak = matmul["theoretical_peak"].get(precision)
            share = figures.get("fraction_of_theoretical_peak")
            versus = (
                f" = {share:.1%} of the theoretical {_rate(peak['tflops'] * 1e12)}"
                if peak and share is not None
                else " (no theoretical peak in the table)"
            )
            lines.append(
                f"  {precision}: {_rate(figures['best_flops_per_s'])} at n={figures['best_size']}"
                + versus
            )
            for row in figures["by_size"]:
                if "skipped" in row:
                    lines.append(f"    n={row['n']} not timed: {row['skipped']}")
    transfer = result.get("transfer")
    if transfer:
        h2d = _bandwidth(transfer["h2d"]["best_bytes_per_s"])
        d2h = _bandwidth(transfer["d2h"]["best_bytes_per_s"])
        lines.append(f"host-device copies (pinned): host->device {h2d}, device->host {d2h}")
    allreduce = result.get("allreduce")
    if allreduce:
        lines.append(f"all-reduce ({allreduce['backend']}, {allreduce['workers']} processes):")
        lines.append("  size        time        algbw       busbw")
        for point in allreduce["points"]:
            lines.append(
                f"  {format_bytes(point['size_bytes']):>9}  {point['time_s'] * 1e6:>9.1f} us"
                f"  {_bandwidth(point['algbw_bytes_per_s']):>10}  "
                f"{_bandwidth(point['busbw_bytes_per_s']):>10}"
            )
        fit = allreduce["fit"]
        bandwidth = fit["bandwidth_bytes_per_s"]
        lines.append(
            f"  alpha-beta fit: alpha {fit['alpha_s'] * 1e6:.1f} us, beta "
            f"{fit['beta_s_per_byte'] * 1e9:.4f} ns/byte"
            + (f" (1/beta = {_bandwidth(bandwidth)})" if bandwidth else "")
            + f", worst point off by {fit['max_relative_error']:.0%}"
        )
    for kind, why in result.get("skipped", {}).items():
        lines.append(f"{kind}: not measured ({why})")
    ids = ", ".join(f"{kind} {probe_id[:8]}" for kind, probe_id in result["probe_ids"].items())
    lines.append(f"stored in {result['store']}: {ids or 'nothing'}")
    return lines
