"""`trainscale simulate`: predict how a workload scales on a cluster, or validate the model."""

from __future__ import annotations

import argparse
from typing import Any

from trainscale.cli.common import add_json_argument, add_plot_argument, add_store_argument
from trainscale.cli.simulate_output import print_result
from trainscale.cli.simulate_published import add_published_arguments, run_published
from trainscale.config.cli import add_declared_group, declared_from_args, refuse_given
from trainscale.errors import ConfigError
from trainscale.simulator.options import (
    MonteCarloOptions,
    ScalingOptions,
    StepModelOptions,
)

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
    add_declared_group(parser, StepModelOptions)
    add_declared_group(parser, ScalingOptions)
    add_declared_group(parser, MonteCarloOptions)
    validation = parser.add_argument_group(
        "validation",
        "predict stored measured runs instead, each on its own machine (or on --cluster)",
    )
    validation.add_argument(
        "--validate",
        action="store_true",
        help="predict every stored measured run not used for calibration, with the error",
    )
    validation.add_argument("--tag", help="with --validate: only runs with this tag")
    validation.add_argument("--sweep", metavar="SWEEP_ID", help="with --validate: only this sweep")
    add_published_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument(
        "--list-clusters", action="store_true", help="list the cluster presets and exit"
    )
    add_store_argument(out)
    add_json_argument(out)
    add_plot_argument(out)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from trainscale.simulator import run as simulator

    model = declared_from_args(StepModelOptions, args)
    scaling = declared_from_args(ScalingOptions, args)
    monte_carlo = declared_from_args(MonteCarloOptions, args)
    published = run_published(args, monte_carlo, unused=(model, scaling))
    if published is not None:
        return published
    common = {"monte_carlo": monte_carlo, "store": args.store, "plot_dir": args.plot}
    result: Any
    if args.list_clusters:
        result = simulator.cluster_presets()
    elif args.validate:
        why = "is for predictions; --validate predicts each run at its own workers and batch"
        refuse_given(scaling, None, why)
        result = simulator.validate_simulator(
            workload=args.workload, model=model, tag=args.tag, sweep=args.sweep, **common
        )
    else:
        if not args.workload:
            raise ConfigError("give a WORKLOAD to simulate (or --validate, or --list-clusters)")
        # An unknown name is the first thing to say, before the store or the cluster is read.
        simulator.check_target(args.workload)
        if args.tag or args.sweep:
            raise ConfigError("--tag and --sweep select runs for --validate only")
        result = simulator.simulate_scaling(args.workload, model=model, scaling=scaling, **common)
    return print_result(result, args.json)
