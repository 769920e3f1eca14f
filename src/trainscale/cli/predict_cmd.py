"""`trainscale predict-time-to-accuracy`: emulated steps to target x predicted step time."""

from __future__ import annotations

import argparse

from trainscale.cli.common import add_json_argument, add_plot_argument, add_store_argument
from trainscale.cli.lines import print_json
from trainscale.config.cli import add_declared_group, declared_from_args
from trainscale.simulator.options import MonteCarloOptions, StepModelOptions

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
        "--emulation",
        metavar="ID",
        help="only the runs of this emulation (its id, as in the tag emulate:ID)",
    )
    add_declared_group(parser, StepModelOptions)
    add_declared_group(parser, MonteCarloOptions)
    out = parser.add_argument_group("output")
    add_store_argument(out)
    add_json_argument(out)
    add_plot_argument(out)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from trainscale.cli.console import table_console
    from trainscale.simulator.run import time_to_accuracy
    from trainscale.simulator.tables import print_time_to_accuracy

    result = time_to_accuracy(
        args.workload,
        model=declared_from_args(StepModelOptions, args),
        emulation=args.emulation,
        monte_carlo=declared_from_args(MonteCarloOptions, args),
        store=args.store,
        plot_dir=args.plot,
    )
    if args.json:
        print_json(result.to_dict())
        return 0
    print_time_to_accuracy(
        table_console(),
        result.workload,
        result.cluster,
        result.calibration,
        result.layout,
        result.rows,
    )
    for path in result.plots:
        print(f"wrote {path}")
    return 0
