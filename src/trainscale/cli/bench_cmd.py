"""`trainscale bench`: the main job. A ladder of CPU settings, measured, stored, tabulated."""

from __future__ import annotations

import argparse
import os
import tempfile
import uuid
from pathlib import Path

from trainscale.cli.common import add_store_argument
from trainscale.config.cli import add_option_arguments
from trainscale.errors import ConfigError, DataError, TrainscaleError

DEFAULT_STEPS = 100
QUICK_STEPS = 30


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="the main job: compare serial, threaded, pinned data-parallel and naive settings",
        description=(
            "Train a workload through a ladder of settings on this machine: 1 core fp32 serial "
            "(the baseline), 1 process with all cores as threads, N pinned workers, the same "
            "in bf16 where the CPU has native bf16, and a naive unpinned oversubscribed DDP run "
            "(the pitfall). Every rung uses the same global batch, so speedups compare like "
            "with like. Then the fastest setting trains the full recipe for accuracy and time "
            "to target. Every run is stored; the table is printed and written as Markdown."
        ),
        epilog="About 5 minutes on a 2-core machine; --quick takes about 1 minute.",
    )
    parser.add_argument("--workload", default="mnist-cnn", help="workload (default: mnist-cnn)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_STEPS} steps a rung and no full-recipe accuracy run",
    )
    parser.add_argument(
        "--steps",
        type=int,
        metavar="N",
        help=f"training steps per throughput rung, a whole number >= 1 (default: "
        f"{DEFAULT_STEPS}; --quick {QUICK_STEPS})",
    )
    parser.add_argument(
        "--data",
        choices=("auto", "real", "synthetic"),
        default="auto",
        help="auto = real data when found, else synthetic with a warning",
    )
    add_option_arguments(parser, only=("data_dir", "download"))
    add_store_argument(parser, as_path=False)
    parser.add_argument(
        "--out",
        metavar="FILE",
        default="trainscale-bench.md",
        help="where to write the Markdown table, in an existing writable directory "
        "(default: trainscale-bench.md)",
    )
    parser.set_defaults(handler=run)


def _choose_data(args: argparse.Namespace, base) -> tuple[object, str | None]:
    """Real data when it can be found; synthetic (with a loud note) otherwise. Either way
    the run is prepared (resolved, data sized, batch and memory checked) before any rung."""
    from trainscale.run.resolve import prepare

    if args.data == "synthetic":
        synthetic = base.with_(data="synthetic")
        prepare(synthetic)
        return synthetic, None
    try:
        config = prepare(base)
        return base.with_(data_dir=config.data.data_dir), None
    except DataError as error:
        if args.data == "real":
            raise
        note = (
            f"REAL DATA NOT FOUND, measuring on SYNTHETIC data (throughput only, no "
            f"accuracy): {error}"
        )
        synthetic = base.with_(data="synthetic")
        prepare(synthetic)
        return synthetic, note


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from trainscale.bench import RungResult, Skipped, markdown_table, plan_ladder, table_rows
    from trainscale.config.options import RunOptions
    from trainscale.hardware.facts import collect_environment
    from trainscale.results.outputs import check_out_file
    from trainscale.results.store import RunStore, default_store_path
    from trainscale.run.launch import RunFailed, execute_run
    from trainscale.workloads import get_workload

    console = Console(stderr=True)
    workload = get_workload(args.workload)
    if args.steps is not None and args.steps < 1:
        raise ConfigError(f"--steps must be a whole number >= 1, got {args.steps}")
    steps = args.steps if args.steps is not None else (QUICK_STEPS if args.quick else DEFAULT_STEPS)
    out_path = Path(args.out)
    check_out_file(out_path)
    store_path = args.store or default_store_path()
    # Every rung writes to the store: one that cannot be used fails now, in one line, not
    # once per rung with a table of failures written anyway.
    RunStore(store_path).close()
    env = collect_environment()
    bench_id = uuid.uuid4().hex[:8]
    base = RunOptions.of(
        workload=workload.name,
        data_dir=args.data_dir,
        download=args.download,
        steps=steps,
        # Same global batch on every rung: the same optimisation, so speedups are fair.
        global_batch_size=workload.recipe.batch_size,
        evaluate=False,
        tag=f"bench:{bench_id}",
    )
    base, data_note = _choose_data(args, base)
    if data_note:
        console.print(f"[bold red]{data_note}[/]")
    ladder = plan_ladder(base, len(env["usable_cores"]), bool(env["bf16_native"]), len(env["gpus"]))
    runnable = [r for r in ladder if not isinstance(r, Skipped)]
    console.print(
        f"[bold]trainscale bench {bench_id}[/]: {workload.name}, {env['cpu_model']}, "
        f"{len(env['usable_cores'])} usable cores, {len(runnable)} settings x {steps} "
        f"steps, global batch {workload.recipe.batch_size}, data {base.data.kind}"
    )
    results: list[RungResult] = []
    for index, rung in enumerate(ladder, start=1):
        if isinstance(rung, Skipped):
            results.append(RungResult(rung))
            continue
        console.rule(f"[{index}/{len(ladder)}] {rung.name}")
        try:
            # Each rung must be able to divide the global batch among its workers.
            results.append(RungResult(rung, execute_run(rung.options, store_path)))
        except (RunFailed, TrainscaleError) as error:
            console.print(f"[red]{rung.name} failed: {error}[/]")
            results.append(RungResult(rung, error=str(error)))

    if not args.quick and base.data.kind == "real":
        finished = [r for r in results if r.result and not r.rung.pitfall]
        if finished:
            best = max(finished, key=lambda r: r.result["samples_per_s"])
            from trainscale.bench import Rung

            full = Rung(
                f"{best.rung.name}, full recipe ({workload.recipe.epochs:g} epoch)",
                best.rung.options.with_(steps=None, evaluate=True),
                cores=best.rung.cores,
                note="accuracy run: fastest setting above",
            )
            console.rule(f"full recipe on the fastest setting: {best.rung.name}")
            try:
                results.append(RungResult(full, execute_run(full.options, store_path)))
            except (RunFailed, TrainscaleError) as error:
                results.append(RungResult(full, error=str(error)))

    rows = table_rows(results)
    table = Table(title=f"trainscale bench {bench_id}: {workload.name} on {env['cpu_model']}")
    headers = [h for h in rows[0] if h != "note"]
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(row[h] for h in headers))
    out = Console()
    out.print(table)
    # Notes go under the table: in a column they would fold it beyond reading on 80 columns.
    for row in rows:
        if row["note"]:
            out.print(f"  {row['setting']}: {row['note']}")
    lines = [
        f"# trainscale bench {bench_id}: {workload.name}",
        "",
        f"Machine: {env['cpu_model']}, {len(env['usable_cores'])} usable cores, "
        f"torch {env['torch_version']}, bf16 native: {env['bf16_native']}. "
        f"Data: {base.data.kind}. Global batch {workload.recipe.batch_size} on every rung; "
        f"throughput rungs train {steps} steps ({base.measurement.warmup_steps_untimed} "
        "warm-up steps untimed). Speedup is against the serial 1-core run; "
        "efficiency = speedup / cores given.",
        "",
    ]
    if data_note:
        lines += [f"**{data_note}**", ""]
    lines += [
        markdown_table(rows),
        "",
        f"Runs are stored with tag `bench:{bench_id}` "
        f"(`trainscale runs list --tag bench:{bench_id}`).",
        "",
    ]
    # Write beside the target and rename: a reader never sees half a table.
    fd, tmp = tempfile.mkstemp(dir=out_path.parent or ".", prefix=".bench-", suffix=".md")
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(lines))
    os.replace(tmp, out_path)
    console.print(f"table written to {out_path}")
    ran = [r for r in results if not isinstance(r.rung, Skipped)]
    # Partial failures are in the table and the store; only "nothing ran" fails the command.
    return 1 if ran and all(r.error is not None for r in ran) else 0
