"""`trainscale simulate`: predict how a workload scales on a cluster, or validate the model."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.config.limits import (
    DEFAULT_MONTE_CARLO_SAMPLES,
    MAX_MONTE_CARLO_SAMPLES,
    check_count,
)
from trainscale.errors import ConfigError, TrainscaleError

EPILOG = """\
examples:
  trainscale simulate mnist-cnn                                  # this machine, 1 and 2 workers
  trainscale simulate cifar10-resnet44 --cluster v100-nvlink-ib --workers 1,2,4,8,16
  trainscale simulate mnist-cnn --cluster my-cluster.toml --calibrate-from 3f2a9c1e
  trainscale simulate mnist-cnn --cluster cpu-25gbe --algorithm hierarchical --plot out/
  trainscale simulate --validate                                 # predict held-out stored runs
  trainscale simulate --list-clusters

Compute time comes from stored serial runs of the workload on the cluster's device (or the
cluster file's peak x efficiency when there is none), the network from a stored
`trainscale probe` of this machine or the cluster file. See docs/simulator.md.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from trainscale.simulate.collectives import ALGORITHMS

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
    parser.add_argument("workload", nargs="?", help="workload name (see `trainscale workloads`)")
    parser.add_argument(
        "--cluster",
        metavar="PRESET|FILE",
        help="a preset (`--list-clusters`), a cluster TOML file, or 'local' (default: local; "
        "with --validate: each run's own machine)",
    )
    parser.add_argument(
        "--workers",
        metavar="N,N,...",
        help="worker counts to predict, each >= 1 (default: powers of two up to the "
        "cluster's devices)",
    )
    parser.add_argument(
        "--calibrate-from",
        nargs="+",
        metavar="RUN_ID",
        default=None,
        help="stored runs to calibrate from: serial runs give compute, multi-worker runs an "
        "effective network (default: the matching serial runs in the store)",
    )
    batch = parser.add_mutually_exclusive_group()
    batch.add_argument(
        "--batch-size",
        type=int,
        metavar="B",
        help="per-worker batch, >= 1, kept as workers grow (default: the calibration runs')",
    )
    batch.add_argument(
        "--global-batch-size",
        type=int,
        metavar="B",
        help="global batch, >= 1, split over the workers (strong scaling)",
    )
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        help="with --cluster local: the device kind (default: cuda where a GPU is visible)",
    )
    parser.add_argument(
        "--threads-per-worker",
        type=int,
        metavar="T",
        help="with --cluster local on a CPU: cores per worker (default: as in the newest "
        "stored serial run of the workload on this machine, else 1)",
    )
    parser.add_argument(
        "--algorithm",
        choices=ALGORITHMS,
        help="gradient exchange (default: the cluster file's, else ring)",
    )
    parser.add_argument(
        "--bucket-cap-mb",
        type=float,
        metavar="MB",
        help="DDP bucket size in MiB, > 0 (default: torch's 25, first bucket 1)",
    )
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
    parser.add_argument("--seed", type=int, default=0, help="Monte Carlo seed (default: 0)")
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
    add_store_argument(parser)
    add_json_argument(parser)
    parser.add_argument("--plot", type=Path, metavar="DIR", help="write PNG plots into DIR")
    parser.set_defaults(handler=run)


def _check_numbers(args: argparse.Namespace) -> None:
    for name in ("batch_size", "global_batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    check_count(
        "--samples",
        args.samples,
        1,
        MAX_MONTE_CARLO_SAMPLES,
        "the stratified samples' quantiles are within 1/samples already",
    )
    if args.threads_per_worker is not None and args.threads_per_worker < 1:
        raise ConfigError(f"--threads-per-worker must be at least 1, got {args.threads_per_worker}")
    if args.bucket_cap_mb is not None and not args.bucket_cap_mb > 0:
        raise ConfigError(f"--bucket-cap-mb must be positive, got {args.bucket_cap_mb}")
    if args.straggler_sigma is not None and not 0 <= args.straggler_sigma < 5:
        raise ConfigError(f"--straggler-sigma must be in [0, 5), got {args.straggler_sigma}")


def run(args: argparse.Namespace) -> int:
    from trainscale.results.store import default_store_path

    _check_numbers(args)
    if args.list_clusters:
        return _list_clusters(args)
    store_path = args.store or default_store_path()
    if args.validate:
        return _validate(args, store_path)
    if not args.workload:
        raise ConfigError("give a WORKLOAD to simulate (or --validate, or --list-clusters)")
    from trainscale.workloads import get_workload

    # An unknown name is the first thing to say, before the store or the cluster is read.
    get_workload(args.workload)
    if args.tag or args.sweep:
        raise ConfigError("--tag and --sweep select runs for --validate only")
    return _predict(args, store_path)


def _predict(args: argparse.Namespace, store_path: Path) -> int:
    from trainscale.simulate.predict import predict_scaling
    from trainscale.simulate.setup import (
        calibrate,
        default_workers,
        open_store,
        parse_workers,
        resolve_cluster,
    )

    store = open_store(store_path, required=bool(args.calibrate_from))
    try:
        cluster = resolve_cluster(
            args.cluster or "local",
            store,
            device=args.device,
            threads_per_worker=args.threads_per_worker,
            workload=args.workload,
        )
        workers = parse_workers(args.workers) if args.workers else default_workers(cluster)
        for count in workers:
            cluster.check_workers(count)
        setup = calibrate(
            args.workload,
            cluster,
            store,
            run_ids=args.calibrate_from or (),
            precision=args.precision,
            bucket_cap_mb=args.bucket_cap_mb,
            sigma_override=args.straggler_sigma,
        )
    finally:
        if store is not None:
            store.close()
    predictions = predict_scaling(
        setup.calibration,
        setup.layout,
        cluster,
        workers,
        per_worker_batch=args.batch_size,
        global_batch=args.global_batch_size,
        algorithm=args.algorithm,
        samples=args.samples,
        seed=args.seed,
    )
    written = []
    if args.plot:
        from trainscale.simulate.plots import scaling_plots

        written = _write_plots(args.plot, scaling_plots(predictions, args.workload, cluster.name))
    if args.json:
        print(
            json.dumps(
                {
                    "workload": args.workload,
                    "cluster": cluster.describe(),
                    "calibration": setup.calibration.to_dict(),
                    "gradients": setup.layout.to_dict(),
                    "predictions": [p.to_dict() for p in predictions],
                    "plots": written,
                }
            )
        )
        return 0
    from trainscale.simulate.tables import print_predictions

    print_predictions(args.workload, cluster, setup.calibration, setup.layout, predictions)
    for path in written:
        print(f"wrote {path}")
    return 0


def _validate(args: argparse.Namespace, store_path: Path) -> int:
    from trainscale.simulate.calibrate import probe_link
    from trainscale.simulate.setup import cached_layout, load_runs, open_store
    from trainscale.simulate.validate import validate_runs

    if args.workload:
        from trainscale.workloads import get_workload

        get_workload(args.workload)
    store = open_store(store_path, required=True)
    assert store is not None
    with store:
        cluster = None
        if args.cluster and args.cluster != "local":
            from trainscale.simulate.cluster import resolve_cluster_argument

            cluster = resolve_cluster_argument(args.cluster)
        sweep_id = store.get_sweep(args.sweep).sweep_id if args.sweep else None
        records = store.list_runs(
            workload=args.workload, status="completed", tag=args.tag, sweep_id=sweep_id
        )
        given = load_runs(store, args.calibrate_from or ())
        probes: dict[tuple[Any, str], Any] = {}

        def link_for(record):
            from trainscale.simulate.calibrate import device_kind

            key = (record.env.get("hostname"), device_kind(record))
            if key not in probes:
                probes[key] = probe_link(store, key[0], key[1])
            return probes[key]

        if given:
            known = {r.run_id for r in records}
            records = records + [r for r in given if r.run_id not in known]
        report = validate_runs(
            records,
            cached_layout,
            calibrate_from=given or None,
            cluster=cluster,
            link_for=link_for,
            sigma_override=args.straggler_sigma,
            sigma_records=store.list_runs(status="completed"),
            samples=args.samples,
            seed=args.seed,
        )
    if not report.rows:
        reasons = "; ".join(sorted({why for _, why in report.skipped})) or (
            "no measured run besides the calibration runs"
        )
        raise TrainscaleError(f"nothing to validate in {store_path}: {reasons}")
    written = []
    if args.plot:
        from trainscale.simulate.plots import validation_plots

        written = _write_plots(args.plot, validation_plots(report))
    if args.json:
        out = report.to_dict()
        out["plots"] = written
        print(json.dumps(out))
        return 0
    from trainscale.simulate.tables import print_validation

    print_validation(report)
    for path in written:
        print(f"wrote {path}")
    return 0


def _write_plots(folder: Path, plots: list[Any]) -> list[str]:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for plot in plots:
            path = folder / plot.file_name
            path.write_bytes(plot.png)
            paths.append(str(path))
    except OSError as error:
        raise TrainscaleError(
            f"cannot write plots to {folder}: {error.strerror or error}"
        ) from None
    return paths


def _list_clusters(args: argparse.Namespace) -> int:
    from trainscale.simulate.cluster import LOCAL, load_preset, preset_names

    presets = [load_preset(name) for name in preset_names() if name != LOCAL]
    if args.json:
        print(json.dumps({"presets": [p.describe() for p in presets], "generated": [LOCAL]}))
        return 0
    from trainscale.simulate.tables import print_clusters

    print_clusters(presets)
    return 0
