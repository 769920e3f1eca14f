"""`trainscale run WORKLOAD`: train one workload in one setting, measure it, store it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.config import SCHEDULES, THREADS_TORCH_DEFAULT, RunOptions
from trainscale.resources import MAX_WORKERS_PER_CORE

EPILOG = """\
examples:
  trainscale run mnist-cnn                                  # 1 worker, all cores as threads
  trainscale run mnist-cnn --workers 2 --affinity compact --epochs 1
  trainscale run mnist-cnn --workers 2 --affinity "0;1" --global-batch-size 256 --lr-scaling linear
  trainscale run mnist-cnn --data synthetic --steps 50 --json
  torchrun --nproc-per-node 2 -m trainscale run mnist-cnn   # joins an external launcher
  trainscale run mnist-cnn --nnodes 2 --rdzv-endpoint node001:29500 --rdzv-id job7  # each node

Data: --data-dir DIR is the only place looked in when given (the data is read from it, or
the run is refused). Without it: $TRAINSCALE_DATA_DIR, then the cache
($TRAINSCALE_CACHE_DIR or ~/.cache/trainscale), then other tools' caches; when online the
files are downloaded into the cache with checksum verification.

exit status: 0 completed; 1 the run failed (stored as failed, with the reason); 2 a mistake
in the command (nothing stored); 3 the nodes never formed the job (nothing stored); 130 or
143 stopped by Ctrl-C or SIGTERM (stored as failed: 'interrupted (SIGINT)' or '(SIGTERM)').
"""


def _threads(text: str) -> int | str:
    if text == THREADS_TORCH_DEFAULT:
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number or {THREADS_TORCH_DEFAULT!r}, got {text!r}"
        ) from None


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def add_dataset_arguments(group: argparse._ArgumentGroup) -> None:
    """--data-dir, -o KEY=VALUE and --no-download: where the data is and how it is read."""
    group.add_argument(
        "--data-dir",
        metavar="DIR",
        help="directory with the dataset files; the only place looked in when given",
    )
    group.add_argument(
        "-o",
        "--workload-option",
        dest="workload_options",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="a workload-specific option, repeatable (see `trainscale workloads`)",
    )
    group.add_argument(
        "--no-download",
        dest="download",
        action="store_false",
        help="never download; fail if the files are not found locally",
    )


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of one run; shared with commands that run workloads (bench, sweeps)."""
    data = parser.add_argument_group("data")
    data.add_argument(
        "--data",
        choices=("real", "synthetic"),
        default="real",
        help="real dataset files, or random tensors of the same shapes "
        "(throughput only: no accuracy is reported) (default: real)",
    )
    add_dataset_arguments(data)

    par = parser.add_argument_group("parallelism")
    par.add_argument(
        "--device",
        choices=("cpu", "cuda", "auto"),
        default="cpu",
        help="train on the CPU, or one GPU per worker (cuda); auto = cuda when a GPU is "
        "visible (default: cpu)",
    )
    par.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes, >= 1; >1 trains data-parallel (DDP: gloo on CPU, NCCL on "
        "GPUs); at most the usable cores // threads unless --allow-oversubscribe, and never "
        f"more than {MAX_WORKERS_PER_CORE} per core or the open-file limit allows "
        "(default: 1)",
    )
    par.add_argument(
        "--threads-per-worker",
        type=_threads,
        default=None,
        metavar="T",
        help="intra-op threads per worker, >= 1 (default: cores // workers); "
        f"'{THREADS_TORCH_DEFAULT}' leaves torch's default (the oversubscription "
        "pitfall)",
    )
    par.add_argument(
        "--affinity",
        default="compact",
        metavar="MODE",
        help="pin workers to cores: none, compact, spread, or per-worker core lists "
        "such as '0,1;2,3' (default: compact)",
    )
    par.add_argument(
        "--allow-oversubscribe",
        action="store_true",
        help="run even if workers x threads exceeds the available cores (up to "
        f"{MAX_WORKERS_PER_CORE} workers per core)",
    )
    par.add_argument(
        "--timeout",
        dest="timeout_s",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds a worker waits for a silent peer before the run fails, > 0 (default: 300)",
    )
    par.add_argument(
        "--bucket-cap-mb",
        type=float,
        metavar="MB",
        help="DDP gradient bucket size in MiB, > 0 (default: torch's, 25)",
    )
    par.add_argument(
        "--grad-accum",
        type=int,
        default=1,
        metavar="K",
        help="split each worker's batch into K micro-batches (K >= 1 dividing the batch); "
        "only the last one all-reduces (DDP no_sync) (default: 1)",
    )

    hp = parser.add_argument_group("training")
    batch = hp.add_mutually_exclusive_group()
    batch.add_argument(
        "--batch-size",
        type=int,
        metavar="B",
        help="per-worker batch size, from 1 to a worker's share of the training set "
        "(default: the workload's recipe)",
    )
    batch.add_argument(
        "--global-batch-size",
        type=int,
        metavar="B",
        help="global batch size, split evenly over the workers (a multiple of them; each "
        "share at most a worker's share of the training set)",
    )
    hp.add_argument("--optimizer", choices=("sgd", "adam", "adamw"))
    hp.add_argument("--lr", type=float, help="peak lr at the workload's reference batch size, > 0")
    hp.add_argument(
        "--lr-scaling",
        choices=("none", "linear", "sqrt"),
        default="none",
        help="scale the lr with global batch / reference batch (default: none)",
    )
    hp.add_argument(
        "--warmup-fraction",
        type=float,
        metavar="F",
        help="share of steps with linear lr warm-up, in [0, 1)",
    )
    hp.add_argument("--schedule", choices=SCHEDULES)
    hp.add_argument("--weight-decay", type=float, metavar="WD", help="L2 weight decay, >= 0")
    hp.add_argument(
        "--precision",
        choices=("fp32", "bf16", "fp16"),
        default="fp32",
        help="bf16 = autocast to bfloat16 (fast on GPUs, and on CPUs with native bf16); "
        "fp16 = autocast to float16 with loss scaling (GPU only)",
    )
    hp.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (compilation is timed apart, off the training clock)",
    )
    length = hp.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=float, help="epochs, > 0 (fractions allowed)")
    length.add_argument("--steps", type=int, help="optimizer steps, >= 1 (overrides epochs)")
    hp.add_argument("--seed", type=int, default=0, help="random seed, >= 0 (default: 0)")

    meas = parser.add_argument_group("measurement")
    meas.add_argument(
        "--eval-every",
        type=int,
        metavar="STEPS",
        help="evaluate every STEPS steps (>= 1), off the training clock (default: 4 times an "
        "epoch)",
    )
    meas.add_argument(
        "--no-eval",
        dest="evaluate",
        action="store_false",
        help="skip evaluation: throughput only, no accuracy reported",
    )
    meas.add_argument(
        "--target-accuracy",
        type=float,
        metavar="ACC",
        help="test accuracy for time-to-target, a fraction in (0, 1] (default: workload's)",
    )
    meas.add_argument(
        "--warmup-steps",
        dest="warmup_steps_untimed",
        type=int,
        default=5,
        metavar="N",
        help="first steps left out of step-time statistics, >= 0 (default: 5)",
    )
    meas.add_argument(
        "--breakdown-every",
        type=int,
        default=25,
        metavar="N",
        help="time data/forward/backward/optimizer/exposed communication on every N-th "
        "step after warm-up; 0 = never (default: 25)",
    )


def options_from_args(args: argparse.Namespace, workload: str | None = None) -> RunOptions:
    """RunOptions from parsed arguments (the names match the dataclass fields)."""
    fields = {
        name: getattr(args, name) for name in RunOptions.__dataclass_fields__ if hasattr(args, name)
    }
    if workload is not None:
        fields["workload"] = workload
    if isinstance(fields.get("workload_options"), list):
        fields["workload_options"] = dict(fields["workload_options"])
    return RunOptions(**fields)


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
    parser.add_argument("workload", help="workload name (see `trainscale workloads`)")
    add_run_options(parser)
    add_node_options(parser)
    out = parser.add_argument_group("output")
    add_store_argument(out, as_path=False)
    out.add_argument("--tag", help="free-form label stored with the run")
    add_json_argument(out)
    out.add_argument("--quiet", action="store_true", help="no progress output")
    parser.set_defaults(handler=run)


def add_node_options(parser: argparse.ArgumentParser) -> None:
    """Several machines in one run (docs/multinode.md); only `run` takes them."""
    from trainscale.parallel.rendezvous import DEFAULT_RDZV_TIMEOUT_S, RDZV_EXIT_CODE

    nodes = parser.add_argument_group(
        "several nodes",
        "Run the same command on every node; --workers is per node. Global rank 0 stores\n"
        f"the run. Exit status {RDZV_EXIT_CODE}: the nodes never formed the job (nothing "
        "stored).\nSee docs/multinode.md.",
    )
    nodes.add_argument(
        "--nnodes",
        type=int,
        default=1,
        metavar="N",
        help="nodes in the job, >= 1; world size = N x --workers (default: 1)",
    )
    nodes.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        help="where the nodes meet: an address of one node that every node can reach "
        "(required when N > 1)",
    )
    nodes.add_argument(
        "--rdzv-id",
        metavar="ID",
        help="job id, the same on every node (default under SLURM: slurm-JOB-STEP; "
        "required otherwise when N > 1)",
    )
    nodes.add_argument(
        "--rdzv-timeout",
        dest="rdzv_timeout_s",
        type=float,
        default=DEFAULT_RDZV_TIMEOUT_S,
        metavar="S",
        help="seconds a node waits for the endpoint and the other nodes, > 0 "
        f"(default: {DEFAULT_RDZV_TIMEOUT_S:g})",
    )


def format_result(result: dict[str, Any]) -> str:
    """A few human lines about a finished run."""
    acc = result.get("test_accuracy")
    ttt = result.get("time_to_target_s")
    lines = [
        f"run {result['run_id'][:8]}  {result['workload']}  {result['status']}  "
        f"data={result['data']}",
        f"  {result['world_size']} worker(s) x {result['threads_per_worker'] or 'default'} "
        f"thread(s), affinity {result['affinity']}, {result['precision']}, global batch "
        f"{result['global_batch_size']}",
        f"  throughput {result['samples_per_s']:.1f} samples/s, median step "
        f"{result['step_time_s_median'] * 1000:.1f} ms",
    ]
    if result["data"] == "synthetic":
        lines.append("  synthetic data: throughput only, no accuracy is claimed")
    elif acc is None:
        lines.append("  evaluation skipped: throughput only")
    else:
        reached = f"{ttt:.1f} s" if ttt is not None else "not reached"
        lines.append(f"  test accuracy {acc:.4f}; time to target: {reached} (training clock)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from trainscale.parallel.rendezvous import RendezvousFailed
    from trainscale.runner import RemoteResult, RunFailed, execute_run

    opts = options_from_args(args)
    try:
        result = execute_run(opts, args.store, quiet=args.quiet or args.json)
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
    print(json.dumps(result) if args.json else format_result(result))
    return 0
