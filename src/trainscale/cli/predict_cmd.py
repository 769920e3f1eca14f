"""`trainscale predict-time-to-accuracy`: emulated steps to target x predicted step time."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.config.limits import (
    DEFAULT_MONTE_CARLO_SAMPLES,
    MAX_MONTE_CARLO_SAMPLES,
    check_count,
)
from trainscale.errors import ConfigError, TrainscaleError

EPILOG = """\
examples:
  trainscale predict-time-to-accuracy mnist-cnn --cluster v100-nvlink-ib
  trainscale predict-time-to-accuracy mnist-cnn --cluster cpu-25gbe --emulation 3f2a9c1e
  trainscale predict-time-to-accuracy mnist-cnn --json --plot out/

Steps to the target come from stored `trainscale emulate` runs (they depend on the global
batch, not on the hardware); the time of a step from the performance model on the cluster
(it depends on the hardware). Their product shows where more workers stop shortening
training. See docs/simulator.md.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from trainscale.simulate.collectives import ALGORITHMS

    parser = subparsers.add_parser(
        "predict-time-to-accuracy",
        help="time to target accuracy on a cluster: emulated steps x predicted step time",
        description=(
            "For every stored emulation of the workload (mode, workers, global batch, steps "
            "to the target), predict the time per step on the cluster and multiply: the "
            "predicted time to accuracy, and the worker count beyond which more hardware "
            "does not train faster."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("workload", help="workload name (see `trainscale workloads`)")
    parser.add_argument(
        "--cluster",
        default="local",
        metavar="PRESET|FILE",
        help="a preset (`trainscale simulate --list-clusters`), a cluster TOML file, or "
        "'local' (default)",
    )
    parser.add_argument(
        "--emulation",
        metavar="ID",
        help="only the runs of this emulation (its id, as in the tag emulate:ID)",
    )
    parser.add_argument(
        "--calibrate-from",
        nargs="+",
        metavar="RUN_ID",
        default=None,
        help="measured runs to calibrate the step time from (default: the matching serial runs)",
    )
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--device", choices=("cpu", "cuda"), help="with --cluster local")
    parser.add_argument(
        "--threads-per-worker",
        type=int,
        metavar="T",
        help="with --cluster local on a CPU: cores per worker (default: as in the newest "
        "stored serial run of the workload on this machine, else 1)",
    )
    parser.add_argument("--algorithm", choices=ALGORITHMS, help="gradient exchange")
    parser.add_argument(
        "--straggler-sigma",
        type=float,
        metavar="S",
        help="lognormal spread of a worker's compute time, in [0, 5) (default: from the runs)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=DEFAULT_MONTE_CARLO_SAMPLES,
        metavar="N",
        help=f"Monte Carlo samples per prediction, 1 to {MAX_MONTE_CARLO_SAMPLES:,} "
        f"(default: {DEFAULT_MONTE_CARLO_SAMPLES})",
    )
    parser.add_argument("--seed", type=int, default=0)
    add_store_argument(parser)
    add_json_argument(parser)
    parser.add_argument("--plot", type=Path, metavar="DIR", help="write a PNG plot into DIR")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from trainscale.cli.simulate_cmd import _write_plots
    from trainscale.results.store import default_store_path
    from trainscale.simulate.setup import calibrate, open_store, resolve_cluster
    from trainscale.simulate.time_to_accuracy import (
        best_by_mode,
        emulated_setting,
        predict_time_to_accuracy,
    )
    from trainscale.workloads import get_workload

    # An unknown name is the first thing to say, before any store or emulation is looked at.
    get_workload(args.workload)
    check_count(
        "--samples",
        args.samples,
        1,
        MAX_MONTE_CARLO_SAMPLES,
        "the stratified samples' quantiles are within 1/samples already",
    )
    if args.threads_per_worker is not None and args.threads_per_worker < 1:
        raise ConfigError(f"--threads-per-worker must be at least 1, got {args.threads_per_worker}")
    if args.straggler_sigma is not None and not 0 <= args.straggler_sigma < 5:
        raise ConfigError(f"--straggler-sigma must be in [0, 5), got {args.straggler_sigma}")
    store_path = args.store or default_store_path()
    store = open_store(store_path, required=True)
    assert store is not None
    with store:
        records = store.list_runs(workload=args.workload, status="completed")
        if args.emulation:
            tag = f"emulate:{args.emulation.strip()}"
            records = [r for r in records if (r.tag or "").startswith(tag)]
        settings = [s for s in (emulated_setting(r) for r in records) if s is not None]
        if not settings:
            which = f" with tag {tag}" if args.emulation else ""
            raise TrainscaleError(
                f"no completed emulation of {args.workload}{which} in {store_path}; run "
                f"`trainscale emulate {args.workload} ...` first"
            )
        cluster = resolve_cluster(
            args.cluster,
            store,
            device=args.device,
            threads_per_worker=args.threads_per_worker,
            workload=args.workload,
        )
        if args.algorithm:
            cluster = replace(cluster, algorithm=args.algorithm)
        setup = calibrate(
            args.workload,
            cluster,
            store,
            run_ids=args.calibrate_from or (),
            precision=args.precision,
            sigma_override=args.straggler_sigma,
        )
    rows = predict_time_to_accuracy(
        settings, setup.calibration, setup.layout, cluster, samples=args.samples, seed=args.seed
    )
    written = []
    if args.plot:
        from trainscale.simulate.plots import time_to_accuracy_plot

        written = _write_plots(args.plot, time_to_accuracy_plot(rows, args.workload, cluster.name))
    if args.json:
        print(
            json.dumps(
                {
                    "workload": args.workload,
                    "cluster": cluster.describe(),
                    "calibration": setup.calibration.to_dict(),
                    "rows": [r.to_dict() for r in rows],
                    "best_by_mode": best_by_mode(rows),
                    "plots": written,
                }
            )
        )
        return 0
    from trainscale.simulate.tables import print_time_to_accuracy

    print_time_to_accuracy(args.workload, cluster, setup.calibration, setup.layout, rows)
    for path in written:
        print(f"wrote {path}")
    return 0
