"""`trainscale emulate WORKLOAD`: the accuracy of N workers, emulated in one process."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import uuid
from pathlib import Path
from typing import Any

from trainscale.cli.common import add_store_argument
from trainscale.config.cli import add_option_arguments, options_from_args

EMULATED_OPTIONS = (
    "lr_scaling",
    "lr",
    "optimizer",
    "epochs",
    "steps",
    "seed",
    "eval_every",
    "target_accuracy",
    "data",
    "data_dir",
    "download",
    "workload_options",
)
"""The run options that shape an emulation (the others describe real workers)."""

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
    out.add_argument("--json", action="store_true", help="print the results as one JSON object")
    out.add_argument("--quiet", action="store_true", help="no progress output")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Emulate every N in turn, store each as a run, print the table (or JSON)."""
    import torch

    from trainscale.data.tensors import Located
    from trainscale.emulate.engine import emulate, plan_global_steps
    from trainscale.emulate.record import (
        complete_emulation,
        create_emulation_row,
        emulation_tag,
    )
    from trainscale.emulate.spec import (
        EmulationSpec,
        emulation_config,
        parse_workers,
        resolve_spec,
    )
    from trainscale.parallel.interrupts import failure_reason
    from trainscale.results.store import RunStore, default_store_path
    from trainscale.run.record import new_run_id
    from trainscale.run.worker import load_data
    from trainscale.train.progress import make_progress
    from trainscale.workloads import get_workload

    # Everything a user can get wrong is checked for every N before the first one trains.
    counts = parse_workers(args.workers)
    workload = get_workload(args.workload)
    specs = [
        resolve_spec(
            EmulationSpec(
                mode=args.mode,
                workers=n,
                per_worker_batch_size=args.per_worker_batch_size,
                local_steps=args.local_steps,
                staleness_spread=args.staleness_spread,
                staleness_aware_lr=args.staleness_aware_lr,
            ),
            workload.recipe.batch_size,
        )
        for n in counts
    ]
    emulation_id = uuid.uuid4().hex[:12]
    options = options_from_args(args, workload.name).with_(tag=emulation_tag(emulation_id))
    located: dict[tuple[Any, ...], Located] = {}
    configs = [emulation_config(options, spec, located) for spec in specs]
    store_file = Path(args.store) if args.store else default_store_path()
    RunStore(store_file).close()  # a store that cannot be written fails now, not after training
    data = load_data(configs[0])  # every N trains on the same data: load it once
    plans = [
        plan_global_steps(config, spec, data.num_train)
        for config, spec in zip(configs, specs, strict=True)
    ]
    if configs[0].parallel.threads_per_worker is not None:
        torch.set_num_threads(configs[0].parallel.threads_per_worker)

    quiet = args.quiet or args.json
    rows = []
    for index, (config, spec, plan) in enumerate(zip(configs, specs, plans, strict=True), 1):
        if not quiet:
            print(
                f"[{index}/{len(specs)}] {workload.name} {spec.mode} x{spec.workers}: "
                f"per-worker batch {spec.per_worker_batch_size}, {spec.samples_per_step} "
                f"samples a global step, lr {config.optimisation.lr:.4g}, "
                f"{plan.total_steps} global steps",
                file=sys.stderr,
                flush=True,
            )
        run_id = new_run_id()
        with RunStore(store_file) as store:
            create_emulation_row(store, run_id, config, spec)
        try:
            outcome = emulate(config, spec, workload, data, make_progress(True, quiet))
        except BaseException as error:  # Ctrl-C, SIGTERM, or a bug: recorded, then reported
            with RunStore(store_file) as store:
                store.fail_run(run_id, failure_reason(error))
            raise
        with RunStore(store_file) as store:
            complete_emulation(store, run_id, outcome)
        rows.append(_row(run_id, outcome.summary, outcome.epochs))

    report = _report_command(rows, emulation_id, args.store)
    if args.json:
        print(
            json.dumps(
                {
                    "emulation_id": emulation_id,
                    "tag": emulation_tag(emulation_id),
                    "workload": workload.name,
                    "mode": args.mode,
                    "runs": rows,
                    "report": report,
                }
            )
        )
    else:
        print(format_table(workload.name, args.mode, emulation_id, rows))
        print(f"report: {report}")
    return 0


def _row(run_id: str, summary: dict[str, Any], epochs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "run_id": run_id,
        **summary["emulation"],
        "test_accuracy": summary["test_accuracy"],
        "accuracy_by_epoch": [e["test_accuracy"] for e in epochs],
        "time_to_target_s": summary["time_to_target_s"],
    }


def _report_command(rows: list[dict[str, Any]], emulation_id: str, store: str | None) -> str:
    words = ["trainscale", "report", "--runs", *(r["run_id"][:8] for r in rows)]
    words += ["--out", f"emulate-{emulation_id}"]
    if store:
        words += ["--store", store]
    return shlex.join(words)


def format_table(workload: str, mode: str, emulation_id: str, rows: list[dict[str, Any]]) -> str:
    """The emulation's results, one line per N."""
    first = rows[0]
    lines = [
        f"emulation {emulation_id}: {workload}, mode {mode}, per-worker batch "
        f"{first['per_worker_batch_size']}, lr scaling {first['lr_scaling']}, target "
        f"accuracy {first['target_accuracy']}",
    ]
    if mode == "local-sgd":
        lines[0] += f", {first['local_steps']} local steps"
    header = (
        f"{'N':>4}  {'global batch':>12}  {'lr':>9}  {'final acc':>9}  {'steps to target':>15}  "
        f"{'samples to target':>17}  {'staleness mean/max':>18}  accuracy by epoch"
    )
    lines.append(header)
    for row in rows:
        staleness = row.get("staleness")
        stale = f"{staleness['mean']:.2f}/{staleness['max']}" if staleness else "-"
        steps = row["steps_to_target"]
        samples = row["samples_to_target"]
        by_epoch = " ".join(f"{a:.4f}" for a in row["accuracy_by_epoch"])
        lines.append(
            f"{row['workers']:>4}  {row['global_batch_size']:>12}  {row['lr']:>9.4g}  "
            f"{row['test_accuracy']:>9.4f}  {steps if steps is not None else 'not reached':>15}  "
            f"{samples if samples is not None else '-':>17}  {stale:>18}  {by_epoch}"
        )
    lines.append(
        "global batch = samples per global step (async: one worker's gradient); steps to "
        "target counted at evaluations"
    )
    return "\n".join(lines)
