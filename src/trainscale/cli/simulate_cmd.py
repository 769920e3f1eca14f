"""`trainscale simulate`: predict how a workload scales on a cluster, or validate the model."""

from __future__ import annotations

import argparse
from typing import Any

from trainscale.cli.common import (
    SIMULATED_PRECISION_HELP,
    add_cluster_argument,
    add_json_argument,
    add_monte_carlo_arguments,
    add_plot_argument,
    add_step_model_arguments,
    add_store_argument,
)
from trainscale.cli.simulate_output import print_result
from trainscale.cli.simulate_published import add_published_arguments, run_published
from trainscale.config.cli import add_option_arguments
from trainscale.errors import ConfigError

EPILOG = """\
examples:
  trainscale simulate mnist-cnn                                  # this machine, 1 and 2 workers
  trainscale simulate cifar10-resnet44 --cluster v100-nvlink-ib --workers 1,2,4,8,16
  trainscale simulate mnist-cnn --cluster my-cluster.toml --calibrate-from 3f2a9c1e
  trainscale simulate mnist-cnn --cluster cpu-25gbe --algorithm hierarchical --plot out/
  trainscale simulate resnet50 --cluster dgx1-v100 --nodes 32 --workers 8,64,256
  trainscale simulate script:train.py --cluster my-cluster.toml   # a script's stored runs
  trainscale simulate --validate                                 # predict held-out stored runs
  trainscale simulate --fit-to tf-benchmarks-k80-p2-8xlarge-resnet50  # fit part of a table
  trainscale simulate --validate-published --plot out/          # every published table

Compute time comes from stored serial runs of the workload on the cluster's device (or the
cluster file's peak x efficiency when there is none), the network from a stored
`trainscale probe` of this machine or the cluster file. See docs/simulator.md.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="predict step time, throughput and speedup on a cluster; --validate checks it",
        description=(
            "Predict each step of data-parallel training on a cluster: compute per gradient "
            "bucket, bucketed all-reduce overlapped with backward as DDP does it, optimizer, "
            "data, and stragglers; then step time, throughput, speedup, efficiency and the "
            "share of exposed communication. With --validate, predict every stored measured "
            "run that calibration did not use and report the error."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "workload", nargs="?", help="workload name (`trainscale workloads`) or script:NAME.py"
    )
    add_cluster_argument(
        parser, default=None, where="local; with --validate: each run's own machine"
    )
    parser.add_argument(
        "--workers",
        metavar="N,N,...",
        help="worker counts to predict, each >= 1 (default: powers of two up to the "
        "cluster's devices)",
    )
    add_step_model_arguments(parser)
    add_option_arguments(
        parser,
        only=("batch_size", "global_batch_size", "precision", "bucket_cap_mb"),
        help_overrides={
            "batch_size": "per-worker batch, >= 1, kept as workers grow (default: the "
            "calibration runs')",
            "global_batch_size": "global batch, >= 1, split over the workers (strong scaling)",
            "precision": SIMULATED_PRECISION_HELP,
            "bucket_cap_mb": "DDP bucket size in MiB, > 0 (default: torch's 25, first bucket 1)",
        },
        defaults={"precision": "fp32"},
    )
    add_monte_carlo_arguments(parser)
    parser.add_argument(
        "--validate",
        action="store_true",
        help="predict every stored measured run not used for calibration, with the error",
    )
    parser.add_argument("--tag", help="with --validate: only runs with this tag")
    parser.add_argument("--sweep", metavar="SWEEP_ID", help="with --validate: only this sweep")
    parser.add_argument(
        "--list-clusters", action="store_true", help="list the cluster presets and exit"
    )
    add_published_arguments(parser)
    add_store_argument(parser)
    add_json_argument(parser)
    add_plot_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from trainscale.simulate import run as simulator

    published = run_published(args)
    if published is not None:
        return published
    simulator.check_simulation_inputs(
        samples=args.samples,
        threads_per_worker=args.threads_per_worker,
        straggler_sigma=args.straggler_sigma,
        bucket_cap_mb=args.bucket_cap_mb,
        batch_size=args.batch_size,
        global_batch_size=args.global_batch_size,
    )
    common = {
        "calibrate_from": args.calibrate_from or (),
        "straggler_sigma": args.straggler_sigma,
        "samples": args.samples,
        "seed": args.seed,
        "store": args.store,
        "plot_dir": args.plot,
    }
    result: Any
    if args.list_clusters:
        result = simulator.cluster_presets()
    elif args.validate:
        if args.nodes:
            raise ConfigError("--nodes is for predictions; --validate uses each run's machine")
        result = simulator.validate_simulator(
            workload=args.workload, cluster=args.cluster, tag=args.tag, sweep=args.sweep, **common
        )
    else:
        if not args.workload:
            raise ConfigError("give a WORKLOAD to simulate (or --validate, or --list-clusters)")
        # An unknown name is the first thing to say, before the store or the cluster is read.
        simulator.check_target(args.workload)
        if args.tag or args.sweep:
            raise ConfigError("--tag and --sweep select runs for --validate only")
        result = simulator.simulate_scaling(
            args.workload,
            cluster=args.cluster or "local",
            nodes=args.nodes,
            workers=args.workers,
            batch_size=args.batch_size,
            global_batch_size=args.global_batch_size,
            precision=args.precision,
            device=args.device,
            threads_per_worker=args.threads_per_worker,
            algorithm=args.algorithm,
            bucket_cap_mb=args.bucket_cap_mb,
            **common,
        )
    return print_result(result, args.json)
