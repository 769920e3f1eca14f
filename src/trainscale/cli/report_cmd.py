"""`trainscale report`: Markdown, CSV and a self-contained HTML page for a sweep or for runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainscale.cli.common import add_json_argument, add_store_argument
from trainscale.cli.values import given_name, given_path
from trainscale.results.store import default_store_path

EPILOG = """\
examples:
  trainscale report --sweep 81ede878 --out report/          # a sweep's report
  trainscale report --runs 85dbb7fe 022cce95 --out report/  # chosen runs, grouped by config
  trainscale report --tag bench:3f2a9c1e --out report/      # a bench's runs, paired by round
  trainscale report --sweep 81ede878 --out report/ --baseline "serial 1 core"
  trainscale report --tag bench:3f2a9c1e --out report/ --json | jq '.configurations[].speedup'

writes DIR/report.html (plots embedded), DIR/report.md, DIR/report.csv and one PNG per plot;
see docs/reports.md for what each figure means.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `trainscale report`."""
    parser = subparsers.add_parser(
        "report",
        help="write a report (Markdown, CSV, HTML with plots) of a sweep, chosen runs or a tag",
        description=(
            "Group stored runs into configurations and report, per configuration, median "
            "throughput with its spread, speedup and efficiency against a named baseline, "
            "time to accuracy, final accuracy and peak memory, with plots (throughput, "
            "speedup with an Amdahl fit, efficiency, accuracy over time, time to accuracy, "
            "step-time breakdown). Noisy configurations are flagged."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sweep", metavar="ID", help="a sweep id, or a unique prefix of it")
    source.add_argument(
        "--runs", nargs="+", metavar="ID", help="run ids (or unique prefixes) to report together"
    )
    source.add_argument(
        "--tag",
        metavar="TAG",
        help=(
            "the runs stored with this tag: a bench's bench:ID, an emulation's emulate:ID, a "
            "search's recommend:ID, or a run's own --tag"
        ),
    )
    parser.add_argument(
        "--out",
        type=given_path,
        required=True,
        metavar="DIR",
        help="directory to write the report to",
    )
    parser.add_argument(
        "--baseline",
        type=given_name,  # an empty one fell back to the default baseline unsaid
        metavar="LABEL_OR_RUN_ID",
        help=(
            "the configuration speedups are measured against, by label or by the id of one "
            "of its runs (default, per workload: the 1-worker configuration with the fewest "
            "cores)"
        ),
    )
    parser.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help=(
            "price table (TOML, $ per device-hour) for the cost columns (default: "
            "$TRAINSCALE_PRICES, else the example prices shipped with trainscale; see "
            "docs/hardware.md)"
        ),
    )
    add_json_argument(
        parser,
        help=(
            "also print the report as one JSON object (the files, report.csv's rows, each "
            "workload's baseline and Amdahl fit, the runs not completed); the summary goes "
            "to stderr"
        ),
    )
    add_store_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Write the report; a mistake raises a TrainscaleError (one line, exit 2)."""
    from trainscale.cli.lines import print_json
    from trainscale.reporting.build import build_report
    from trainscale.reporting.report_document import not_drawn_lines, report_document

    store_path = args.store if args.store is not None else default_store_path()
    written = build_report(
        store_path,
        sweep_id=args.sweep,
        run_ids=args.runs,
        tag=args.tag,
        out_dir=args.out,
        baseline=args.baseline,
        prices=args.prices,
    )
    summary = sys.stderr if args.json else sys.stdout  # stdout carries the JSON alone
    data = written.data
    busy = sum(c.busy_runs for c in data.configurations)
    if busy:  # first: it changes how every speedup in the report reads
        completed = sum(c.repeats for c in data.configurations)
        print(
            f"{busy} of {completed} run(s) ran on a busy machine: their figures are shown but "
            "kept out of speedup verdicts (marked not trusted)",
            file=summary,
        )
    print(
        f"report of {data.source}: {len(data.configurations)} configuration(s), "
        f"{len(written.plots)} plot(s), {len(data.not_completed)} run(s) not completed",
        file=summary,
    )
    for path in (written.html, written.markdown, written.csv):
        print(f"  {path}", file=summary)
    for line in not_drawn_lines(written):
        print(f"  plot not drawn: {line}", file=summary)
    if args.json:
        print_json(report_document(written, args.out), indent=2)
    return 0
