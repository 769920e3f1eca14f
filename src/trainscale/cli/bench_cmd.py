"""`trainscale bench`: the main job. A ladder of CPU settings, measured, stored, tabulated."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainscale.benchmark.options import BenchOptions
from trainscale.benchmark.run import DEFAULT_OUT, BenchResult
from trainscale.cli.bench_progress import Progress
from trainscale.cli.common import add_data_choice_argument, add_json_argument, add_store_argument
from trainscale.cli.lines import print_json, stdout_to_stderr
from trainscale.cli.values import given_file_path_text
from trainscale.config.cli import add_declared_options, add_option_arguments, declared_from_args
from trainscale.parallel.interrupts import describe, exit_status


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="the main job: compare serial, threaded, pinned data-parallel and naive settings",
        description=(
            "Train a workload through a ladder of settings on this machine: 1 core fp32 serial "
            "(the baseline), 1 process with all cores as threads, N pinned workers, the same "
            "in bf16 where the CPU has native bf16, and a naive unpinned oversubscribed DDP run "
            "(the pitfall); with GPUs, 1 GPU (and N GPUs over NCCL), fp32 and native bf16, "
            "against the fastest CPU setting. Every rung trains the same global batch (the "
            "recipe's samples per optimizer step, split evenly among the rung's workers), so "
            "speedups compare like "
            "with like. The rungs run in short rounds, each rung once a round in rotated order, "
            "and each speedup is the median of the ratios to the serial run within a round, "
            "with a 95% interval over rounds. Then the fastest setting trains the full recipe "
            "for accuracy and time to target. Every run is stored; the table is printed and "
            "written as Markdown."
        ),
        epilog="About 5 minutes on a quiet 2-core machine with MNIST, --quick about 1 minute "
        "(measured: docs/benchmarks.md); from the second round on, the progress says how long "
        "the remaining rounds take, from the rounds measured here. On a busy "
        "machine busy rounds are measured again, so up to twice that (--max-extra-rounds). Without "
        "real data (auto) the bench measures synthetic data, throughput only, and says so in "
        "its first line; give it MNIST with --data-dir DIR or TRAINSCALE_DATA_DIR=DIR.",
    )
    parser.add_argument(
        "target",
        nargs="?",
        metavar="SCRIPT.py",
        help="your own training script, its arguments after -- (docs/own-scripts.md); or a "
        "workload, as --workload",
    )
    parser.set_defaults(script_args=None)  # after `--`: the script's own (cli/__init__.py)
    parser.add_argument("--workload", help="workload (default: mnist-cnn)")
    add_declared_options(parser, BenchOptions)
    add_data_choice_argument(
        parser, help="auto = real data when found, else synthetic with a warning"
    )
    add_option_arguments(parser, only=("framework", "data_dir", "download"))
    add_store_argument(parser, as_path=False)
    parser.add_argument(
        "--out",
        type=given_file_path_text,
        metavar="FILE",
        default=DEFAULT_OUT,
        help="where to write the Markdown table, in an existing writable directory "
        f"(default: {DEFAULT_OUT})",
    )
    add_json_argument(
        parser,
        help="print the bench as one JSON object (its table, verdicts, configurations and "
        "runs) instead of the table; progress stays on stderr",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trainscale.benchmark import run_bench
    from trainscale.benchmark.script_bench import bench_target

    console = Console(stderr=True)
    workload, script = bench_target(args.target, args.workload, args.script_args is not None)
    progress = Progress(console)
    try:
        with stdout_to_stderr(args.json):  # stdout carries the JSON document, and only it
            result = run_bench(
                workload,
                script=script,
                script_args=args.script_args or (),
                options=declared_from_args(BenchOptions, args),
                framework=args.framework,
                data=args.data,
                data_dir=args.data_dir,
                download=args.download,
                store=args.store,
                out=args.out,
                listener=progress,
            )
    except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM: say where the finished runs are
        if progress.bench_id is None:
            raise
        tag = f"bench:{progress.bench_id}"
        print(
            f"trainscale: bench {progress.bench_id}: {describe(stop)}; the runs it finished "
            f"are stored: trainscale runs list --tag {tag}",
            file=sys.stderr,
        )
        return exit_status(stop)
    if args.json:
        from trainscale.benchmark.document import bench_document
        from trainscale.results.store import default_store_path

        store = Path(args.store) if args.store else default_store_path()
        print_json(bench_document(result, store), indent=2)
    else:
        _print_table(result)
    console.print(f"table written to {result.out}")
    # Partial failures are in the table and the store; only "nothing ran" fails the command.
    return 1 if result.all_failed else 0


def _print_table(result: BenchResult) -> None:
    """The bench's table on stdout, and under it its notes, baselines, verdicts and pitfalls."""
    from rich.table import Table

    from trainscale.cli.console import emit, stdout_console, uncut

    rows = result.rows
    table = Table(title=result.title)
    headers = [h for h in rows[0] if h != "note"]
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(row[h] for h in headers))
    out = stdout_console()  # piped: whole rows, no wrapping at 80 columns
    emit(out, uncut(table))
    # Notes go under the table: in a column they would fold it beyond reading on 80 columns.
    for row in rows:
        if row["note"]:
            out.print(f"  {row['setting']}: {row['note']}")
    for line in result.baseline_lines:  # which baseline answers which question
        out.print(f"  {line}", markup=False, soft_wrap=True)
    for line in result.gpu_lines:  # each GPU setting against the fastest CPU one, paired
        out.print(f"  {line}", markup=False, soft_wrap=True)
    for line in result.pitfall_lines:
        out.print(f"  {line}")
    for line in result.busy_lines:
        out.print(line, style="yellow", markup=False)
