"""`trainscale recommend WORKLOAD`: the fastest setting on this machine that keeps accuracy."""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.config.cli import add_option_arguments
from trainscale.errors import ConfigError, DataError

EPILOG = """\
examples:
  trainscale recommend mnist-cnn                     # the full search (default budget 600 s)
  trainscale recommend mnist-cnn --quick             # shorter trials, shorter accuracy check
  trainscale recommend mnist-cnn --budget-s 120 --json
  trainscale recommend mnist-cnn --data synthetic    # throughput only: accuracy not checked

Searches workers x threads x affinity x precision x per-worker batch with successive
halving over short synthetic-data trials, then checks the finalists' accuracy on real data
against the serial fp32 baseline. Every trial run is stored with the tag recommend:<id>.
See docs/compare-and-recommend.md.
"""

EXPLICIT_FIELDS = ("workers", "threads_per_worker", "affinity", "precision", "batch_size")
"""The searched axes: written in the recommended command even where they are the default."""


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive whole numbers, got {text!r}")
    return values


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "recommend",
        help="search this machine for the fastest setting that keeps accuracy",
        description=(
            "Search workers x threads x affinity x precision x batch size with short trial "
            "runs (successive halving within a time budget), reject settings whose short "
            "accuracy check falls behind the serial fp32 baseline, and print the best "
            "setting, its speedup over the serial baseline and the `trainscale run` command "
            "that reproduces it."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("workload", help="workload name (see `trainscale workloads`)")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=600.0,
        metavar="S",
        help="wall-clock seconds for the whole search, accuracy check included, > 0 (default: 600)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="trials of 5, 15, 45 steps and a 0.1-epoch accuracy check (default 10, 30, 90 "
        "and 0.25)",
    )
    parser.add_argument(
        "--rung-steps",
        type=_int_list,
        metavar="N,N,...",
        help="timed steps of the trials in each rung, each >= 1 (default: 10,30,90)",
    )
    parser.add_argument(
        "--warmup-steps",
        type=int,
        metavar="N",
        help="untimed warm-up steps before each trial's timed steps, >= 0 (default: 5; --quick 3)",
    )
    parser.add_argument(
        "--batch-multipliers",
        type=_int_list,
        default=(1, 2),
        metavar="M,M,...",
        help="per-worker batch sizes to try, as whole multiples (>= 1) of the recipe's; each "
        "batch must fit a worker's share of the training set (default: 1,2)",
    )
    parser.add_argument(
        "--max-workers",
        type=int,
        metavar="N",
        help="try at most N (>= 1) workers (default: all cores)",
    )
    acc = parser.add_argument_group("accuracy check")
    acc.add_argument(
        "--data",
        choices=("auto", "real", "synthetic"),
        default="auto",
        help="real data for the accuracy check; auto = real when found, else skip the check "
        "with a warning; synthetic = skip it (default: auto)",
    )
    acc.add_argument(
        "--accuracy-epochs",
        type=float,
        metavar="E",
        help="length of the accuracy runs in epochs, > 0 (default: 0.25; --quick 0.1)",
    )
    acc.add_argument(
        "--accuracy-tolerance",
        type=float,
        default=0.5,
        metavar="POINTS",
        help="reject a finalist whose test accuracy is more than this many percentage points "
        "(0 to 100) below the baseline's (default: 0.5)",
    )
    add_option_arguments(parser, only=("data_dir", "download"))
    out = parser.add_argument_group("output")
    add_store_argument(out)
    add_json_argument(out)
    parser.set_defaults(handler=run)


def settings_from_args(args: argparse.Namespace):
    """SearchSettings from the command line (with --quick's shorter defaults)."""
    from trainscale.recommend.search import (
        DEFAULT_RUNG_STEPS,
        QUICK_RUNG_STEPS,
        SearchSettings,
    )

    if not 0 <= args.accuracy_tolerance < 100:
        raise ConfigError(
            f"--accuracy-tolerance is in percentage points, 0 to 100; got {args.accuracy_tolerance}"
        )
    rungs = args.rung_steps or (QUICK_RUNG_STEPS if args.quick else DEFAULT_RUNG_STEPS)
    warmup = args.warmup_steps if args.warmup_steps is not None else (3 if args.quick else 5)
    epochs = args.accuracy_epochs
    if epochs is None:
        epochs = 0.1 if args.quick else 0.25
    return SearchSettings(
        rung_steps=tuple(rungs),
        warmup_steps=warmup,
        budget_s=args.budget_s,
        accuracy_epochs=epochs,
        accuracy_tolerance=args.accuracy_tolerance / 100.0,
    )


def _accuracy_base(args: argparse.Namespace, base, baseline, epochs: float):
    """Real-data options for the accuracy runs, or (None, why) when they cannot be made."""
    from trainscale.recommend.search import accuracy_options
    from trainscale.run.resolve import prepare

    if args.data == "synthetic":
        return None, "--data synthetic: accuracy not checked (throughput only)"
    real = base.with_(data="real", data_dir=args.data_dir, download=args.download)
    try:
        config = prepare(accuracy_options(baseline, real, epochs))
    except DataError as error:
        if args.data == "real":
            raise
        return None, (f"REAL DATA NOT FOUND, accuracy NOT checked (throughput only): {error}")
    # Runs read from where the data was found: no second search or download per run.
    return real.with_(data_dir=config.data.data_dir), None


def fit_candidates(space, throughput_base, accuracy_base, accuracy_epochs: float, cores):
    """The space with every candidate checked as a run is, before any trial starts.

    A candidate's per-worker batch must fit a worker's share of the synthetic trial data
    (and of the real data of the accuracy check), and this machine's memory must hold its
    workers. A single worker whose batch exceeds the whole training set comes from
    --batch-multipliers (or the data is too small for the recipe): a mistake, refused in one
    line. Several workers whose shards are too small for the batch, or that memory cannot
    hold, are left out and say so, as other settings the machine cannot run are. `cores`
    are the usable cores the space was built for.
    """
    from dataclasses import replace as replace_field

    from trainscale.recommend.search import accuracy_options
    from trainscale.run.resolve import check_capacity, locate_data, resolve

    located: dict = {}
    advice = "use smaller --batch-multipliers (a candidate's batch is the recipe's x one)"
    kept, skipped = [], list(space.skipped)
    for candidate in [space.baseline, *space.candidates]:
        trials = [candidate.options(throughput_base)]
        if accuracy_base is not None:
            trials.append(accuracy_options(candidate, accuracy_base, accuracy_epochs))
        try:
            for options in trials:
                config, size = locate_data(resolve(options, cores), located)
                check_capacity(config, size, batch_advice=advice)
        except ConfigError as error:
            if candidate is space.baseline or candidate.workers == 1:
                raise ConfigError(f"candidate {candidate.label}: {error}") from None
            skipped.append(f"{candidate.label} skipped: {error}")
            continue
        if candidate is not space.baseline:
            kept.append(candidate)
    return replace_field(space, candidates=kept, skipped=skipped)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from trainscale.config.cli import run_command
    from trainscale.config.options import RunOptions
    from trainscale.hardware.facts import collect_environment
    from trainscale.recommend.search import run_search
    from trainscale.recommend.space import machine_space
    from trainscale.results.store import RunStore, default_store_path
    from trainscale.run.launch import execute_run
    from trainscale.workloads import get_workload

    # Progress goes to stderr even with --json: stdout carries only the result.
    console = Console(stderr=True, highlight=False)
    workload = get_workload(args.workload)
    settings = settings_from_args(args)
    store_path = args.store or default_store_path()
    RunStore(store_path).close()  # an unusable store fails now, not after the first trial
    env = collect_environment()
    space = machine_space(workload.name, args.batch_multipliers, args.max_workers, env)
    recommend_id = uuid.uuid4().hex[:8]
    tag = f"recommend:{recommend_id}"
    base = RunOptions.of(workload=workload.name, tag=tag, download=args.download)
    accuracy_base, data_note = _accuracy_base(args, base, space.baseline, settings.accuracy_epochs)
    throughput_base = base.with_(data="synthetic")
    space = fit_candidates(
        space, throughput_base, accuracy_base, settings.accuracy_epochs, env["usable_cores"]
    )

    console.print(
        f"[bold]trainscale recommend {recommend_id}[/]: {workload.name} on "
        f"{escape(str(env['cpu_model']))}, "
        f"{len(env['usable_cores'])} usable cores; {len(space.candidates)} candidates, rungs of "
        f"{', '.join(map(str, settings.rung_steps))} timed steps, budget {settings.budget_s:.0f} s"
    )
    for line in space.skipped:
        console.print(f"  {escape(line)}")
    for dropped, kept in space.duplicates:
        console.print(f"  {dropped}: same cores as {kept}, not tried twice")
    if data_note:
        console.print(f"[bold red]{escape(data_note)}[/]")

    def run_one(options: RunOptions) -> dict[str, Any]:
        return execute_run(options, store_path, quiet=True)

    listener = ProgressListener(console, settings.budget_s)
    recommendation = run_search(
        space, throughput_base, accuracy_base, settings, run_one, listener=listener
    )
    command_options = recommendation.best.options(RunOptions.of(workload=workload.name)).with_(
        data_dir=args.data_dir,
        download=args.download,
    )
    command = run_command(command_options, explicit=EXPLICIT_FIELDS)
    payload = {
        "recommend_id": recommend_id,
        "workload": workload.name,
        "tag": tag,
        "command": command,
        "data_note": data_note,
        "settings": {
            "rung_steps": list(settings.rung_steps),
            "warmup_steps": settings.warmup_steps,
            "keep_fraction": settings.keep_fraction,
            "budget_s": settings.budget_s,
            "accuracy_epochs": settings.accuracy_epochs,
            "accuracy_tolerance": settings.accuracy_tolerance,
        },
        "space": space.to_dict(),
        **recommendation.to_dict(),
    }
    if args.json:
        print(json.dumps(payload))
    else:
        print(format_recommendation(payload))
    return 0


def format_recommendation(payload: dict[str, Any]) -> str:
    """The human summary: best setting, speedup, accuracy, rejections, command."""
    best = payload["best"]
    lines = [
        f"recommend {payload['recommend_id']}: {payload['workload']}",
        f"best: {best['label']} (global batch {best['global_batch_size']})",
    ]
    rate, base_rate = payload["best_samples_per_s"], payload["baseline_samples_per_s"]
    if rate and base_rate:
        steps = payload["settings"]["rung_steps"][payload["best_rung"]]
        lines.append(
            f"  {rate:.0f} samples/s over {steps} timed steps; serial 1-core fp32 baseline "
            f"{base_rate:.0f} samples/s in the same rung: speedup {payload['speedup']:.2f}x"
        )
    if payload["accuracy_checked"]:
        lines.append(
            f"  accuracy check ({payload['settings']['accuracy_epochs']:g} epoch, real data): "
            f"{payload['best_accuracy']:.4f} against the baseline's "
            f"{payload['baseline_accuracy']:.4f} (tolerance "
            f"{payload['settings']['accuracy_tolerance'] * 100:.2f} points)"
        )
    else:
        lines.append("  accuracy NOT checked (no real data): throughput only")
    if payload["rejected"]:
        lines.append("rejected by the accuracy check:")
        lines += [f"  {r['label']}: {r['reason']}" for r in payload["rejected"]]
    lines.append("ranking (last rung reached, samples/s there):")
    lines += [
        f"  {r['label']:<32} rung {r['rung']}  {r['samples_per_s']:.0f}" for r in payload["ranking"]
    ]
    lines += [f"note: {note}" for note in payload["notes"]]
    lines += [
        f"search took {payload['elapsed_s']:.0f} s of a {payload['budget_s']:.0f} s budget; "
        f"runs stored with tag {payload['tag']} "
        f"(trainscale runs list --tag {payload['tag']})",
        "to reproduce (full recipe):",
        f"  {payload['command']}",
    ]
    return "\n".join(lines)


class ProgressListener:
    """One line per trial on stderr, with the time spent so far against the budget."""

    def __init__(self, console, budget_s: float) -> None:
        import time

        self.console = console
        self.budget_s = budget_s
        self.start = time.monotonic()

    def _clock(self) -> str:
        import time

        return f"[{time.monotonic() - self.start:5.0f}/{self.budget_s:.0f} s]"

    def rung_started(self, rung: int, timed_steps: int, candidates) -> None:
        self.console.rule(
            f"rung {rung}: {len(candidates)} setting(s) x {timed_steps} timed steps "
            "(synthetic data)"
        )

    def trial_started(self, candidate, kind: str, rung: int | None) -> None:
        what = "accuracy check" if kind == "accuracy" else "throughput"
        from rich.markup import escape

        self.console.print(f"{escape(self._clock())} {what}: {candidate.label} ...")

    def trial_finished(self, trial) -> None:
        from rich.markup import escape

        # Run ids are hex: "[d2f4...]" would be read as a style tag, so escape them.
        run = escape(f" [{trial.run_id[:8]}]") if trial.run_id else ""
        if trial.error is not None:
            self.console.print(f"    [red]failed[/]{run}: {escape(trial.error)}")
        elif trial.kind == "accuracy":
            self.console.print(f"    test accuracy {trial.test_accuracy:.4f}{run}")
        else:
            self.console.print(f"    {trial.samples_per_s:.0f} samples/s{run}")

    def note(self, text: str) -> None:
        from rich.markup import escape

        self.console.print(f"[yellow]{escape(text)}[/]")
