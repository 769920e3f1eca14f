"""`trainscale sweep`: many runs from a TOML spec or a built-in recipe, resumable."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape

from trainscale.cli.common import add_store_argument
from trainscale.config.cli import add_option_arguments
from trainscale.errors import ConfigError
from trainscale.parallel.interrupts import describe, exit_status

EPILOG = """\
examples:
  trainscale sweep my-sweep.toml                 # run a sweep file (see docs/sweeps.md)
  trainscale sweep my-sweep.toml --resume        # continue it after Ctrl-C, a crash or kill -9
  trainscale sweep --recipe cpu-parallel --quick # a built-in study (`trainscale recipes`)
  trainscale sweep my-sweep.toml --dry-run       # check it and list the planned runs
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run a grid of configurations (a TOML file or a built-in recipe), resumable",
        description=(
            "Run every configuration of a sweep, one run at a time (so no run disturbs "
            "another's timing), each repeated as asked, and store them all under one sweep "
            "id. A failed run is stored as failed and the sweep goes on. The whole sweep is "
            "checked before the first run starts."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("file", nargs="?", type=Path, help="sweep spec (TOML)")
    source.add_argument("--recipe", metavar="NAME", help="a built-in study (`trainscale recipes`)")
    parser.add_argument(
        "--quick", action="store_true", help="with --recipe: a scaled-down version of the study"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the newest sweep made from the same spec: completed runs are skipped",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="check the spec and list the planned runs"
    )
    add_store_argument(parser)
    parser.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        help="write the sweep's report (Markdown, CSV, HTML with plots) to DIR afterwards; "
        "DIR must be a writable directory or creatable (checked before the first run)",
    )
    # Given on the command line, these replace the sweep's own for every run.
    add_option_arguments(
        parser,
        only=("data", "data_dir"),
        defaults={"data": None},
        help_overrides={
            "data": "override the data of every run (synthetic: throughput only, no accuracy)"
        },
    )
    parser.set_defaults(handler=run)


def load(args: argparse.Namespace):
    """(spec, source) from the file or the recipe named on the command line."""
    from trainscale.sweep.recipes import recipe_spec
    from trainscale.sweep.spec import load_spec_file, parse_spec

    if args.recipe is not None:
        raw = recipe_spec(args.recipe, quick=args.quick)
        spec_source = f"recipe:{args.recipe}" + (" --quick" if args.quick else "")
        spec = parse_spec(raw, default_name=args.recipe, where=f"recipe {args.recipe}")
    else:
        if args.quick:
            raise ConfigError("--quick scales down a recipe; it needs --recipe NAME")
        if args.file is None:
            raise ConfigError(
                "give a sweep file or --recipe NAME (`trainscale recipes` lists them)"
            )
        spec = load_spec_file(args.file)
        spec_source = str(args.file)
    overrides = {"data_dir": args.data_dir, "data": args.data}
    overrides = {key: value for key, value in overrides.items() if value is not None}
    if overrides:
        spec = _with_base(spec, **overrides)
    return spec, spec_source


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trainscale.results.outputs import check_out_dir
    from trainscale.results.store import RunStore, default_store_path
    from trainscale.sweep.execute import execute_sweep
    from trainscale.sweep.plan import make_plan

    console = Console(stderr=True, highlight=False)
    spec, source = load(args)
    store_path = args.store or default_store_path()
    # Fail on an unusable store now, not after the plan's data checks.
    RunStore(store_path).close()
    if args.report:  # and on a report that cannot be written, not after every run
        check_out_dir(args.report)
    with console.status("checking every configuration (options, cores, data)..."):
        plan = make_plan(spec)
    for label, reason in plan.skipped:
        console.print(f"[yellow]skipped (skip_invalid): {label}: {reason}[/]")
    configs = len({p.config_hash for p in plan.runs})
    console.print(
        f"[bold]sweep {spec.name}[/]: {configs} configurations x {spec.repeats} repeat(s) = "
        f"{len(plan.runs)} runs, order {spec.order}, store {store_path}"
    )
    if args.dry_run:
        for planned in plan.runs:
            print(f"{planned.item:4d}  repeat {planned.repeat}  {planned.label}")
        return 0
    listener = ProgressListener(console)
    try:
        outcome = execute_sweep(spec, plan, store_path, source, args.resume, listener)
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: the run in progress is recorded
        # Plain print, not the console: rich would wrap a long command over two lines.
        print(
            f"trainscale: sweep {spec.name}: {describe(stop)}; continue it with: "
            f"{resume_command(args)}",
            file=sys.stderr,
        )
        return exit_status(stop)
    short = outcome.sweep_id[:8]
    if outcome.resumed:
        console.print(f"resumed sweep {short}: {outcome.skipped_done} run(s) were already done")
    print_summary(store_path, outcome.sweep_id)
    console.print(
        f"sweep {short}: {len(outcome.completed)} completed, {len(outcome.failed)} failed in "
        f"this attempt. Report: trainscale report --sweep {short} --out DIR"
    )
    if args.report:
        from trainscale.report.build import write_report

        written = write_report(store_path, sweep_id=outcome.sweep_id, out_dir=args.report)
        console.print(f"report written to {written}")
    # Failed runs are stored and reported; only a sweep where nothing completed fails.
    nothing_done = not outcome.completed and not outcome.skipped_done
    return 1 if nothing_done and outcome.failed else 0


def resume_command(args: argparse.Namespace) -> str:
    """The command that continues this sweep: the same source and options, plus --resume."""
    words = ["trainscale", "sweep"]
    words += ["--recipe", args.recipe] if args.recipe is not None else [str(args.file)]
    if args.quick:
        words.append("--quick")
    options = (
        ("--store", args.store),
        ("--data-dir", args.data_dir),
        ("--data", args.data),
        ("--report", args.report),
    )
    for flag, value in options:
        if value is not None:
            words += [flag, str(value)]
    return shlex.join([*words, "--resume"])


def print_summary(store_path: Path, sweep_id: str) -> None:
    """A table of the sweep's configurations: median throughput, spread, accuracy."""
    from rich.console import Console
    from rich.table import Table

    from trainscale.metrics import stats
    from trainscale.results.store import RunStore

    with RunStore(store_path, create=False) as store:
        sweep = store.get_sweep(sweep_id)
        runs = store.sweep_runs(sweep_id)
    groups: dict[str, list[Any]] = {}
    for record in runs:
        if record.status == "completed":
            groups.setdefault(record.config_hash or "", []).append(record)
    table = Table(title=f"sweep {sweep.short_id}: {sweep.name}")
    for header in ("configuration", "runs", "samples/s (median)", "min..max", "test acc"):
        table.add_column(header)
    for config_hash, label in dict.fromkeys((p["config_hash"], p["label"]) for p in sweep.plan):
        done = groups.get(config_hash, [])
        rates = [r.summary.get("samples_per_s") for r in done]
        rates = [r for r in rates if isinstance(r, (int, float))]
        accuracies = [r.summary.get("test_accuracy") for r in done if r.data_kind == "real"]
        accuracies = [a for a in accuracies if isinstance(a, (int, float))]
        table.add_row(
            label,
            str(len(done)),
            f"{stats.median(rates):.1f}" if rates else "-",
            f"{min(rates):.1f}..{max(rates):.1f}" if rates else "-",
            f"{stats.median(accuracies):.4f}" if accuracies else "-",
        )
    Console().print(table)


class ProgressListener:
    """A rich progress bar over the sweep's runs, with ETA, and one line per finished run."""

    def __init__(self, console) -> None:
        self.console = console
        self.progress = None
        self.task = None

    def start(self, sweep_id: str, todo: int, done: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        if done:
            self.console.print(f"sweep {sweep_id[:8]}: {done} run(s) already completed, skipped")
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
        )
        self.progress.start()
        self.task = self.progress.add_task(f"sweep {sweep_id[:8]}", total=todo)

    def run_started(self, planned) -> None:
        self.progress.update(self.task, description=f"{planned.label} (repeat {planned.repeat})")

    def run_finished(self, planned, result, error) -> None:
        if error is not None:
            self.console.print(
                f"[red]failed[/]: {planned.label} (repeat {planned.repeat}): {error}"
            )
        else:
            accuracy = result.get("test_accuracy")
            acc = f", test acc {accuracy:.4f}" if isinstance(accuracy, float) else ""
            self.console.print(
                f"done: {escape(planned.label)} (repeat {planned.repeat}): "
                f"{result['samples_per_s']:.1f} samples/s{acc}  "
                + escape(f"[{result['run_id'][:8]}]")
            )
        self.progress.advance(self.task)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def _with_base(spec, **changes: Any):
    from dataclasses import replace

    return replace(spec, base={**spec.base, **changes})
