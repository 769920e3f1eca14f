"""`trainscale runs export`: stored runs as CSV or JSON, as MLflow runs or as TensorBoard
event files (docs/tracking.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainscale.cli.lines import one_line
from trainscale.cli.values import given_name, given_path_text, names_a_folder
from trainscale.errors import ConfigError
from trainscale.reporting import listing as stored
from trainscale.reporting.mlflow_export import (
    DEFAULT_EXPERIMENT,
    ExportFailed,
    export_mlflow,
    refuse_in_memory,
    shown_uri,
    tracking_uri_in_use,
)
from trainscale.reporting.tensorboard_export import write_tensorboard
from trainscale.reporting.tracking import ExportedRun, load_runs, require_extra
from trainscale.results.export import EXPORT_FORMATS
from trainscale.results.outputs import is_special_file, written_path

TOOLS = ("mlflow", "tensorboard")
FILTERS = ("workload", "status", "tag", "limit")


def add_parser(actions: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """Register `runs export` under `runs`; `parents` give the run filters and --store."""
    parser = actions.add_parser(
        "export",
        parents=parents,
        help="write runs as CSV or JSON, to MLflow, or as TensorBoard logs",
        description=(
            "Write the stored runs (those named with --run, or else those matching the "
            "filters) as CSV or JSON, as runs of an MLflow experiment (extra: mlflow), or as "
            "TensorBoard event files, one directory per run (extra: tensorboard). "
            "See docs/tracking.md."
        ),
    )
    parser.add_argument(
        "--format", dest="fmt", required=True, choices=EXPORT_FORMATS + TOOLS, help="output format"
    )
    parser.add_argument(
        "--out",
        type=given_path_text,
        metavar="PATH",
        help="csv/json: write to this file instead of standard output; tensorboard: the log "
        "directory (required)",
    )
    parser.add_argument(
        "--run",
        dest="run_ids",
        action="append",
        default=[],
        metavar="RUN_ID",
        help="export this run (id or unique prefix); repeat for several",
    )
    parser.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="mlflow: the tracking store, e.g. sqlite:///mlflow.db or http://host:5000 "
        "(default: $MLFLOW_TRACKING_URI, else MLflow's default)",
    )
    parser.set_defaults(runs_handler=run)
    parser.add_argument(
        "--experiment",
        type=given_name,
        metavar="NAME",
        help="mlflow: the experiment to log to, created if missing "
        f"(default: {DEFAULT_EXPERIMENT})",
    )


def run(args: argparse.Namespace) -> int:
    """Run `runs export`; returns the exit status."""
    _check_flags(args)
    filters = {key: getattr(args, key) for key in FILTERS}
    if args.fmt in EXPORT_FORMATS:
        out = args.out if args.out is not None else sys.stdout
        count = stored.export_stored_runs(
            args.fmt, out, args.store, run_ids=args.run_ids, **filters
        )
        if args.out is not None:
            # Into a device or pipe such as /dev/stdout, the line would join the data.
            into_data = is_special_file(written_path(args.out))
            status = sys.stderr if into_data else sys.stdout
            print(f"wrote {count} {_runs(count)} to {args.out}", file=status)
        return 0
    require_extra(args.fmt)  # before the store is read or anything is written
    runs = load_runs(args.store, run_ids=args.run_ids, **filters)
    if not runs:
        print("no runs to export" + (" match the filters" if any(filters.values()) else ""))
        return 0

    def progress(done: ExportedRun) -> None:
        print(done.line(args.fmt), file=sys.stderr, flush=True)

    def notice(text: str) -> None:
        print(f"{args.fmt}: {text}", file=sys.stderr, flush=True)

    if args.fmt == "mlflow":
        experiment = args.experiment or DEFAULT_EXPERIMENT
        try:
            done = export_mlflow(
                runs,
                tracking_uri=args.tracking_uri,
                experiment=experiment,
                on_run=progress,
                notice=notice,
            )
        except ExportFailed as failure:  # not a mistake in the command: status 1, not 2
            print(f"trainscale: error: {one_line(str(failure))}", file=sys.stderr)
            return 1
        uri = shown_uri(tracking_uri_in_use(args.tracking_uri))
        where = (
            f"MLflow experiment {experiment!r} at {uri} (view: mlflow ui --backend-store-uri {uri})"
        )
    else:
        done = write_tensorboard(runs, args.out, on_run=progress)
        where = f"TensorBoard logs in {args.out} (view: tensorboard --logdir {args.out})"
    actions = [d.action for d in done]
    counts = ", ".join(f"{actions.count(a)} {a}" for a in dict.fromkeys(actions))
    print(f"exported {len(done)} {_runs(len(done))} to {where}: {counts}")
    return 0


def _check_flags(args: argparse.Namespace) -> None:
    """ConfigError for a flag that means nothing to the chosen format."""
    if args.fmt != "mlflow":
        flags = {"--tracking-uri": args.tracking_uri, "--experiment": args.experiment}
        given = [flag for flag, value in flags.items() if value is not None]
        if given:
            raise ConfigError(f"{' and '.join(given)}: for --format mlflow only")
    if args.fmt == "mlflow" and args.out is not None:
        raise ConfigError("--format mlflow writes to --tracking-uri, not --out")
    if args.tracking_uri is not None:
        refuse_in_memory(args.tracking_uri)  # before the store is read
    if args.fmt == "tensorboard" and args.out is None:
        raise ConfigError("--format tensorboard needs --out LOGDIR, the log directory")
    if args.fmt in EXPORT_FORMATS and args.out is not None and names_a_folder(args.out):
        raise ConfigError(f"--out {args.out} names a folder; --format {args.fmt} writes a file")
    args.out = None if args.out is None else Path(args.out)


def _runs(count: int) -> str:
    return "run" if count == 1 else "runs"
