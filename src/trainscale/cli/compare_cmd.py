"""`trainscale compare A B`: is B faster than A, by how much, and is the difference real?"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.cli.lines import print_json
from trainscale.config.limits import DEFAULT_RESAMPLES, MAX_RESAMPLES, MIN_RESAMPLES

if TYPE_CHECKING:
    from trainscale.reporting.compare_runs import RunComparison

EPILOG = """\
examples:
  trainscale compare 3f2a9c1e 7b01d4e2            # two runs (ids or unique prefixes)
  trainscale compare 5c1d:"workers=1" 5c1d:"workers=2"   # two configurations of one sweep
  trainscale compare SWEEP_A SWEEP_B              # two sweeps, configuration by configuration
  trainscale compare SWEEP_A 7b01d4e2 --config "workers=2"
  trainscale compare 3f2a9c1e 7b01d4e2 --json

Each side is a run, the completed runs of a sweep (its repeats), or SWEEP:LABEL, those of
one configuration (SWEEP: an id, unique prefix or name; LABEL: exactly as its report shows
it). A side's step time is the median over its runs of each run's median step, its
throughput the median over its runs of each run's samples/s, as in reports. Ratios are B
over A; the interval is a percentile bootstrap of those figures (runs, then steps, when a
side has repeats); significant: the throughput interval excludes 1.0 and each side timed
two steps or more ("not trusted": a run on a busy machine). Stalls are flagged. See
docs/compare-and-recommend.md.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="ratio of throughput and step time of two runs, sweeps or configurations, with a "
        "95%% interval",
        description=(
            "Compare the timed step times of B against A: the ratio of step times and of "
            "throughputs with bootstrap confidence intervals, a Mann-Whitney rank test, and "
            "whether the difference is significant. Unlike runs (other workload or global "
            "batch) may be compared, but the table says so."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    side_help = "run or sweep id (or unique prefix), or SWEEP:LABEL for one configuration"
    parser.add_argument("a", metavar="A", help=side_help)
    parser.add_argument("b", metavar="B", help=side_help)
    parser.add_argument(
        "--config", metavar="LABEL", help="compare only this configuration of a sweep side"
    )
    confidence = "confidence level of the interval, between 0 and 1 (default: 0.95)"
    parser.add_argument("--confidence", type=float, default=0.95, metavar="C", help=confidence)
    parser.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        metavar="N",
        help=f"bootstrap resamples, {MIN_RESAMPLES} to {MAX_RESAMPLES:,} (default: "
        f"{DEFAULT_RESAMPLES})",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    add_store_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from trainscale.reporting.compare_runs import compare

    comparison = compare(
        args.a,
        args.b,
        config=args.config,
        confidence=args.confidence,
        resamples=args.resamples,
        seed=args.seed,
        store=args.store,
    )
    if args.json:
        print_json(comparison.to_dict())
    else:
        _print_table(comparison)
    return 0


def _print_table(comparison: RunComparison) -> None:
    from rich.table import Table

    from trainscale.cli.console import stdout_console
    from trainscale.reporting.compare_runs import significance_word

    a, b, rows = comparison.a, comparison.b, comparison.rows
    # Sweep labels may hold [brackets]: markup off. Piped output gets a wide, plain table.
    console = stdout_console(plain_width=200, emoji=True)
    table = Table(title=f"B = {b.name} against A = {a.name}")
    level = f"{comparison.confidence * 100:.6g}%"  # 95%, 99.9%: never rounded to 100%
    headers = (
        "configuration",
        "A step ms",
        "B step ms",
        "step time B/A",
        f"throughput B/A [{level} CI]",
        "significant",
        "rank-biserial",
    )
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        low, high = row["throughput_ratio_ci"]
        slow, shigh = row["step_time_ratio_ci"]
        table.add_row(
            row["label"] or "-",
            _side_cell(row["a"], row.get("a_stalls")),
            _side_cell(row["b"], row.get("b_stalls")),
            f"{row['step_time_ratio']:.3f} [{slow:.3f}, {shigh:.3f}]",
            f"{row['throughput_ratio']:.3f} [{low:.3f}, {high:.3f}]",
            significance_word(row),
            f"{row['rank_biserial']:+.2f} (p={row['mann_whitney_p']:.2g})",
        )
    console.print(table)
    method = "hierarchical (runs, then steps)" if any(r["hierarchical"] for r in rows) else "steps"
    console.print(
        "Step time: median over a side's runs of each run's median step; throughput: median "
        "over its runs of each run's samples/s (as in reports). "
        f"Ratios are B/A; throughput > 1 means B is faster. Bootstrap over {method}, "
        f"{rows[0]['num_resamples']} resamples, seed {rows[0]['seed']}."
    )
    for row in rows:
        for note in row["warnings"]:
            prefix = f"{row['label']}: " if row["label"] else ""
            console.print(f"warning: {prefix}{note}")
    for side in (a, b):
        if side.skipped:
            console.print(f"{side.name}: {side.skipped} run(s) not completed, left out")
    if comparison.unmatched:
        labels = ", ".join(map(repr, comparison.unmatched))
        console.print(f"configurations on one side only: {labels}")


def _side_cell(side: dict[str, Any], stalls: str | None) -> str:
    runs = "1 run" if side["num_runs"] == 1 else f"{side['num_runs']} runs"
    cell = f"{side['median_step_s'] * 1000:.2f} ({runs}, {side['num_steps']} steps)"
    # The full figures (mean vs median) are in the warning lines below the table.
    return f"{cell} stalls" if stalls else cell
