"""`trainscale recommend WORKLOAD|SCRIPT.py`: the fastest setting on this machine that keeps
accuracy; for a script, its fastest placement."""

from __future__ import annotations

import argparse
import sys

from trainscale.advisor.options import SEARCH_FIELDS, RecommendOptions
from trainscale.cli.common import add_data_choice_argument, add_json_argument, add_store_argument
from trainscale.cli.lines import print_json, stdout_to_stderr
from trainscale.config.cli import add_declared_options, add_option_arguments, declared_from_args
from trainscale.config.options import option_leaves

EPILOG = """\
examples:
  trainscale recommend mnist-cnn                     # the full search (default budget 600 s)
  trainscale recommend mnist-cnn --quick             # shorter trials, shorter accuracy check
  trainscale recommend mnist-cnn --budget-s 120 --json
  trainscale recommend mnist-cnn --data synthetic    # throughput only: accuracy not checked
  trainscale recommend train.py --quick -- --epochs 1  # your own script (throughput only)
  trainscale recommend train.py --check-accuracy -- --epochs 1  # and its accuracy, run whole

Searches workers x threads x affinity x precision x per-worker batch with successive
halving over short synthetic-data trials, then checks the finalists' accuracy on real data
against the serial fp32 baseline. A script searches workers x threads x affinity only, in
runs stopped after their steps; --check-accuracy then runs the whole script, with its own
arguments, in the baseline and the finalists (outside the budget: the arguments after --
decide how long). Trials are stored with the tag recommend:<id>.
See docs/compare-and-recommend.md.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "recommend",
        help="search this machine for the fastest setting that keeps accuracy",
        description=(
            "Search workers x threads x affinity x precision x batch size with short trial "
            "runs, and on a machine with GPUs 1 GPU and all of them x precision x batch size "
            "in the same trials (successive halving within a time budget), reject settings "
            "whose short "
            "accuracy check falls behind the serial fp32 baseline, and print the best "
            "setting, its speedup over the serial baseline and the `trainscale run` command "
            "that reproduces it. Your own script (SCRIPT.py -- ARGS): workers x threads x "
            "affinity, throughput only unless --check-accuracy."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    help = "a workload (`trainscale workloads`), or your own script, its arguments after --"
    parser.add_argument("workload", metavar="WORKLOAD|SCRIPT.py", help=help)
    parser.set_defaults(script_args=None)  # after `--`: the script's own (cli/__init__.py)
    add_declared_options(parser, RecommendOptions, only=SEARCH_FIELDS)
    acc = parser.add_argument_group("accuracy check")
    add_data_choice_argument(
        acc,
        help="real data for the accuracy check; auto = real when found, else skip the check "
        "with a warning; synthetic = skip it (default: auto); a script's: what it trains on",
    )
    accuracy = [name for name in option_leaves(RecommendOptions) if name not in SEARCH_FIELDS]
    add_declared_options(acc, RecommendOptions, only=accuracy)
    add_option_arguments(parser, only=("framework", "data_dir", "download"))
    out = parser.add_argument_group("output")
    add_store_argument(out)
    add_json_argument(out)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trainscale.advisor.run import recommend, summary_lines
    from trainscale.advisor.script import recommend_target
    from trainscale.advisor.search import AllTrialsFailed
    from trainscale.cli.recommend_progress import RecommendProgress

    # Progress goes to stderr even with --json: stdout carries only the result.
    console = Console(stderr=True, highlight=False)
    workload, script = recommend_target(args.workload, args.script_args is not None)
    try:
        with stdout_to_stderr(args.json):  # stdout carries the JSON document, and only it
            result = recommend(
                workload,
                script=script,
                script_args=args.script_args or (),
                options=declared_from_args(RecommendOptions, args),
                data=args.data,
                data_dir=args.data_dir,
                download=args.download,
                store=args.store,
                listener=RecommendProgress(console),
                framework=args.framework,
            )
    except AllTrialsFailed as failed:  # the trials ran and are stored failed: not a mistake
        print(f"trainscale: {failed}", file=sys.stderr)
        return 1
    payload = result.to_dict()
    if args.json:
        print_json(payload)
    else:
        print("\n".join(summary_lines(payload)))
    return 1 if result.accuracy_failed else 0  # the script failed in its whole run
