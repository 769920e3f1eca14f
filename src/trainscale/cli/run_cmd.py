"""`trainscale run WORKLOAD`: train one workload in one setting, measure it, store it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from trainscale.cli.common import add_json_argument, add_quiet_argument, add_store_argument
from trainscale.cli.lines import one_line, print_json, stdout_to_stderr
from trainscale.cli.script_run import data_wait_line, start
from trainscale.config.cli import add_option_arguments, add_tag_argument
from trainscale.metrics.run_flags import all_steps_timed_text, stall_text
from trainscale.reporting.script_notes import time_to_target_text

EPILOG = """\
examples:
  trainscale run mnist-cnn                                  # 1 worker, all cores as threads
  trainscale run mnist-cnn --workers 2 --affinity compact --epochs 1
  trainscale run mnist-cnn --workers 2 --affinity "0;1" --global-batch-size 256 --lr-scaling linear
  trainscale run mnist-cnn --data synthetic --steps 50 --json
  torchrun --nproc-per-node 2 -m trainscale run mnist-cnn   # joins an external launcher
  trainscale run mnist-cnn --nnodes 2 --rdzv-endpoint node001:29500 --rdzv-id job7  # each node
  trainscale run train.py --workers 2 -- --epochs 1   # your own script (docs/own-scripts.md)

Batch: the global batch (samples per optimizer step over all workers) is split evenly among
the workers. --global-batch-size B fixes it (as bench and the recipes do); --batch-size B is
per worker, and without either each worker takes the recipe's batch, so the global batch is
workers x that. Before it starts, the run prints its split, e.g. "global batch 128 = 2
workers x 64 per worker" (docs/methodology.md, "Same global semantics").

Data: --data-dir DIR is the only place looked in when given (the data is read from it, or
the run is refused). Without it: $TRAINSCALE_DATA_DIR, then the cache
($TRAINSCALE_CACHE_DIR or ~/.cache/trainscale), then other tools' caches; when online the
files are downloaded into the cache with checksum verification.

Contention: while the workers run, the machine is sampled (/proc/stat, the run's own
processes, the load average). A run during which other processes used more than a quarter of
a core on the run's cores, or the hypervisor stole more than 5% of their time, is stored as
busy, with a warning here; recommend leaves busy runs out (unless --include-busy) and reports
mark their speedup as not trusted (docs/methodology.md, "Contention").

exit status: 0 completed; 1 the run failed (stored as failed, with the reason); 2 a mistake
in the command (nothing stored); 3 the nodes never formed the job (nothing stored); 130 or
143 stopped by Ctrl-C or SIGTERM (stored as failed: 'interrupted (SIGINT)' or '(SIGTERM)').
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="train one workload in one setting and store the measured run",
        description="Train one workload, serially or data-parallel on CPU, measure it under "
        "trainscale's rules (warm-up untimed, evaluation off the clock, slowest rank), and "
        "store the run.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "workload",
        help="workload name (see `trainscale workloads`), or SCRIPT.py to measure "
        "your own training script (docs/own-scripts.md)",
    )
    parser.set_defaults(script_args=None)  # after `--`: the script's own (cli/__init__.py)
    add_option_arguments(parser)
    out = parser.add_argument_group("output")
    add_store_argument(out, as_path=False)
    add_tag_argument(parser, out)
    add_json_argument(out)
    add_quiet_argument(out)
    parser.set_defaults(handler=run)


def format_result(result: dict[str, Any]) -> str:
    """A few human lines about a finished run."""
    acc = result.get("test_accuracy")
    lines = [
        f"run {result['run_id'][:8]}  {result['workload']}  {result['status']}  "
        f"data={result['data']}",
        f"  {result['world_size']} worker(s) x {result['threads_per_worker'] or 'default'} "
        f"thread(s), affinity {result['affinity']}, {result['precision']}, global batch "
        f"{result['global_batch_size']}",
        f"  throughput {result['samples_per_s']:.1f} samples/s"
        + (" over the mean step (texts of unequal length)" if result.get("unequal_steps") else "")
        + f", median step {result['step_time_s_median'] * 1000:.1f} ms",
    ]
    if stalls := stall_text(result):  # the headline is the median's: how far is the mean
        lines.append(f"  {stalls} ({result['samples_per_s_mean']:.1f} samples/s on the mean)")
    if untimed := all_steps_timed_text(result):
        lines.append(f"  {untimed}")
    wait = data_wait_line(result)
    if wait:
        lines.append(wait)
    if result["data"] == "synthetic":
        lines.append("  synthetic data: throughput only, no accuracy is claimed")
    elif acc is None:
        lines.append("  evaluation skipped: throughput only")
    else:
        lines.append(f"  test accuracy {acc:.4f}; {time_to_target_text(result)}")
        if result.get("stopped_at_target"):  # the accuracy above is the stop's, not the recipe's
            steps = f"{result['num_steps']} of {result['planned_steps']} planned steps"
            lines.append(f"  stopped at the target (--stop-at-target) after {steps}")
    if profile := (result.get("config") or {}).get("profile"):  # where its files are
        lines.append(f"  profiled: {profile}/rank*.{{trace.json.gz,ops.txt,steps.txt}}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from trainscale.parallel.rendezvous import RendezvousFailed
    from trainscale.runner.launch import RemoteResult, RunFailed

    def announce(text: str) -> None:
        print(f"trainscale: {text}", file=sys.stderr, flush=True)

    try:
        with stdout_to_stderr(args.json):  # stdout carries the JSON document, and only it
            result = start(args, None if args.quiet else announce)
    except RunFailed as failure:
        print(f"trainscale: {failure}", file=sys.stderr)
        return 1
    except RendezvousFailed as failure:  # not a mistake in the command: its own status
        print(f"trainscale: error: {failure}", file=sys.stderr)
        return failure.exit_code
    if result is None:  # a non-zero rank under an external launcher
        return 0
    if isinstance(result, RemoteResult):  # --json prints only where global rank 0 ran
        print(result.describe(), file=sys.stderr if args.json else sys.stdout)
        return 0
    if args.json:
        print_json(result)
    else:
        print(format_result(result))
    warning = busy_warning(result)
    if warning:
        print(warning, file=sys.stderr)
    return 0


def busy_warning(result: dict[str, Any]) -> str | None:
    """One `trainscale: warning:` line for a run stored as busy (why, and the figures)."""
    from trainscale.hardware.contention import BUSY, Contention

    contention = Contention.from_summary(result)
    if contention is None or contention.verdict != BUSY:
        return None
    return one_line(
        f"trainscale: warning: run {result['run_id'][:8]} ran on a busy machine: "
        f"{contention.reason} ({contention.figures()}). Its speed is not trusted: "
        "`trainscale recommend` leaves it out and reports mark its speedup"
    )
