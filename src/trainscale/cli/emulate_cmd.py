"""`trainscale emulate WORKLOAD`: the accuracy of N workers, emulated in one process."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from trainscale.cli.common import add_json_argument, add_quiet_argument, add_store_argument
from trainscale.config.cli import add_option_arguments, options_from_args
from trainscale.emulate.run import EMULATED_OPTIONS, EmulationListener

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
    emu.add_argument(
        "--workers",
        required=True,
        metavar="N[,N...]",
        help="worker counts to emulate (each >= 1), one run each, e.g. 1,2,4,8; async and "
        "local-sgd hold a gradient or a model replica per worker, so memory bounds N",
    )
    emu.add_argument(
        "--mode",
        required=True,
        choices=("sync", "async", "local-sgd"),
        help="sync (DDP), async (parameter server, stale gradients) or local-sgd "
        "(periodic averaging)",
    )
    emu.add_argument(
        "--per-worker-batch-size",
        type=int,
        metavar="B",
        help="each worker's batch, from 1 to a worker's share of the training set "
        "(default: the workload's reference batch)",
    )
    emu.add_argument(
        "--local-steps",
        type=int,
        metavar="H",
        help="local-sgd: local steps between averagings, >= 1 (default: 8)",
    )
    emu.add_argument(
        "--staleness-spread",
        type=float,
        metavar="X",
        help="async: sigma (>= 0) of the lognormal compute time of a gradient, mean 1; 0 = "
        "equal times (default: 0.2)",
    )
    emu.add_argument(
        "--staleness-aware-lr",
        action="store_true",
        help="async: divide each update's lr by its staleness (Zhang et al. 2016)",
    )

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


class Progress(EmulationListener):
    """One line on stderr as each worker count starts training."""

    def __init__(self) -> None:
        self.last: tuple[float, int] | None = None
        """(when the previous worker count started, its samples): the time per sample
        measured here, for the next one's estimate."""

    def started(self, index: int, total: int, spec: Any, config: Any, plan: Any) -> None:
        now = time.monotonic()
        samples = plan.total_steps * spec.samples_per_step
        estimate = ""
        if self.last is not None and self.last[1]:
            # Measured on this machine, as it is now: the previous worker count's seconds
            # per sample (start-up and evaluation included), times this one's samples.
            per_sample = (now - self.last[0]) / self.last[1]
            estimate = f" (about {duration_text(per_sample * samples)}, from the last one here)"
        self.last = (now, samples)
        print(
            f"[{index}/{total}] {config.workload} {spec.mode} x{spec.workers}: "
            f"per-worker batch {spec.per_worker_batch_size}, {spec.samples_per_step} "
            f"samples a global step, lr {config.optimisation.lr:.4g}, "
            f"{plan.total_steps} global steps{estimate}",
            file=sys.stderr,
            flush=True,
        )


def duration_text(seconds: float) -> str:
    """'40 s', '8 min' (`sweeps.estimate.duration_text`, imported when first needed)."""
    from trainscale.sweeps.estimate import duration_text as text

    return text(seconds)


def run(args: argparse.Namespace) -> int:
    """Emulate every N in turn, store each as a run, print the table (or JSON)."""
    from trainscale.emulate.run import run_emulation

    quiet = args.quiet or args.json
    result = run_emulation(
        options_from_args(args),
        args.workers,
        args.mode,
        per_worker_batch_size=args.per_worker_batch_size,
        local_steps=args.local_steps,
        staleness_spread=args.staleness_spread,
        staleness_aware_lr=args.staleness_aware_lr,
        store=args.store,
        progress=not quiet,
        listener=None if quiet else Progress(),
    )
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print("\n".join(result.table_lines()))
        print(f"report: {result.report_command}")
    return 0
