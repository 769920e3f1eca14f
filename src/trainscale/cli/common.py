"""Arguments that several subcommands share, declared once so they read the same everywhere.

The run options are not here: they are declared in config/options.py and added with
`config.cli.add_option_arguments`. These are the commands' own arguments (where results go,
how they are printed, the simulator's sampling); `cli.values` has the types of their values.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import get_args

from trainscale.cli.values import given_path
from trainscale.results.store import DEFAULT_STORE_NAME, STORE_ENV_VAR

ArgumentTarget = argparse.ArgumentParser | argparse._ArgumentGroup


def add_store_argument(target: ArgumentTarget, *, as_path: bool = True) -> None:
    """--store PATH: the results database; `as_path=False` keeps it a string."""
    target.add_argument(
        "--store",
        type=Path if as_path else str,
        metavar="PATH",
        help=f"results database (default: ${STORE_ENV_VAR}, else ./{DEFAULT_STORE_NAME})",
    )


def add_json_argument(
    target: ArgumentTarget, help: str = "print the result as one JSON object"
) -> None:
    """--json: print the result as JSON instead of a table (`help` says what is printed)."""
    target.add_argument("--json", action="store_true", help=help)


def add_quiet_argument(target: ArgumentTarget) -> None:
    """--quiet: no progress output (the result is still printed)."""
    target.add_argument("--quiet", action="store_true", help="no progress output")


def add_data_choice_argument(target: ArgumentTarget, help: str) -> None:
    """--data auto|real|synthetic of commands that measure many runs (`run.data_choice`)."""
    from trainscale.runner.data_choice import DataChoice

    target.add_argument("--data", choices=get_args(DataChoice), default="auto", help=help)


# -- the simulator's arguments (`simulate`, `predict-time-to-accuracy`) ----------------------


def add_monte_carlo_arguments(target: ArgumentTarget) -> None:
    """--samples N and --seed S of the simulator's Monte Carlo over stragglers."""
    from trainscale.config.limits import DEFAULT_MONTE_CARLO_SAMPLES, MAX_MONTE_CARLO_SAMPLES

    target.add_argument(
        "--samples",
        type=int,
        default=DEFAULT_MONTE_CARLO_SAMPLES,
        metavar="N",
        help=f"Monte Carlo samples per prediction, 1 to {MAX_MONTE_CARLO_SAMPLES:,} "
        f"(default: {DEFAULT_MONTE_CARLO_SAMPLES})",
    )
    target.add_argument("--seed", type=int, default=0, help="Monte Carlo seed (default: 0)")


def add_cluster_argument(target: ArgumentTarget, *, default: str | None, where: str) -> None:
    """--cluster PRESET|FILE and --nodes N; `where` says what the cluster's default is."""
    from trainscale.cli.values import positive_int

    target.add_argument(
        "--cluster",
        default=default,
        metavar="PRESET|FILE",
        help="a preset (`trainscale simulate --list-clusters`), a cluster TOML file, or "
        f"'local' (default: {where})",
    )
    target.add_argument(
        "--nodes",
        type=positive_int,
        metavar="N",
        help="nodes of the cluster, >= 1 (default: the cluster file's, else as many as the "
        "workers need); needs an inter-node link for N > 1",
    )


SIMULATED_PRECISION_HELP = (
    "precision of the predicted training: compute is calibrated from stored runs in it, or "
    "from a cluster file's peak for it (auto, a run's choice for this machine, is not "
    "available here)"
)
"""--precision of the simulator (the run option, declared in config/options.py), reworded."""


def add_step_model_arguments(target: ArgumentTarget) -> None:
    """How the simulator calibrates and models a step: --calibrate-from, --device,
    --threads-per-worker, --algorithm, --straggler-sigma. (Here --device and
    --threads-per-worker describe the 'local' cluster, not a run: no 'auto', no
    'torch-default'.)"""
    from trainscale.config.options import Device
    from trainscale.simulate.collectives import ALGORITHMS

    target.add_argument(
        "--calibrate-from",
        nargs="+",
        metavar="RUN_ID",
        default=None,
        help="stored runs to calibrate from: serial runs give compute, multi-worker runs an "
        "effective network (default: the matching serial runs in the store)",
    )
    target.add_argument(
        "--device",
        choices=get_args(Device),
        help="with --cluster local: the device kind (default: cuda where a GPU is visible)",
    )
    target.add_argument(
        "--threads-per-worker",
        type=int,
        metavar="T",
        help="with --cluster local on a CPU: cores per worker (default: as in the newest "
        "stored serial run of the workload on this machine, else 1)",
    )
    target.add_argument(
        "--algorithm",
        choices=ALGORITHMS,
        help="gradient exchange (default: the cluster file's, else ring)",
    )
    target.add_argument(
        "--straggler-sigma",
        type=float,
        metavar="S",
        help="lognormal spread of a worker's compute time, in [0, 5) (default: from the runs)",
    )


def add_plot_argument(target: ArgumentTarget) -> None:
    """--plot DIR: where the PNG plots go."""
    target.add_argument("--plot", type=given_path, metavar="DIR", help="write PNG plots into DIR")
