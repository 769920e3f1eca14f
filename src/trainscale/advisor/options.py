"""What `trainscale recommend` can be asked about its search, declared once: each field is
an option whose docstring is its `--help` text (config/cli.py makes the flags)."""

from __future__ import annotations

from dataclasses import dataclass

from trainscale.config.options import option
from trainscale.config.values import comma_positive_ints

DEFAULT_BUDGET_S = 600.0

SEARCH_FIELDS = (
    "budget_s",
    "quick",
    "rung_steps",
    "warmup_steps",
    "batch_multipliers",
    "max_workers",
    "include_busy",
)
"""The options of the search itself (the others are the accuracy check's)."""


@dataclass(frozen=True, kw_only=True)
class RecommendOptions:
    """How long and how wide the search is, and how accuracy is checked; None means "the
    default for --quick"."""

    budget_s: float = option(DEFAULT_BUDGET_S, metavar="S")
    """seconds for the whole search, a workload's accuracy check included (not a script's
    whole runs of --check-accuracy), > 0"""
    quick: bool = option(False)
    """trials of 5, 15, 45 steps and a 0.1-epoch accuracy check (default 10, 30, 90 and
    0.25)"""
    rung_steps: tuple[int, ...] | None = option(None, metavar="N,N,...", parse=comma_positive_ints)
    """timed steps of the trials in each rung, each >= 1 (default: 10,30,90)"""
    warmup_steps: int | None = option(None, metavar="N")
    """untimed warm-up steps before each trial's timed steps, >= 0 (default: 5; --quick 3)"""
    batch_multipliers: tuple[int, ...] | None = option(
        None, metavar="M,M,...", parse=comma_positive_ints
    )
    """per-worker batch sizes to try, as whole multiples (>= 1) of the recipe's, each fitting
    a worker's share of the training set (default: 1,2; not for a script)"""
    max_workers: int | None = option(None, metavar="N")
    """try at most N (>= 1) workers (default: all)"""
    include_busy: bool = option(False)
    """rank throughput trials that ran on a busy machine (other work on their cores); by
    default their samples/s is left out, and the first line says how many"""
    accuracy_epochs: float | None = option(None, metavar="E")
    """length of the accuracy runs in epochs, > 0 (default: 0.25; --quick 0.1)"""
    accuracy_tolerance: float | None = option(None, metavar="POINTS")
    """reject a finalist whose test accuracy is more than this many percentage points (0 to
    100) below the baseline's (default: 0.5); a script's with --check-accuracy"""
    check_accuracy: bool = option(False)
    """a script: after the search, run the WHOLE script (to its own end, with its own
    arguments: make it short with them, e.g. -- --epochs 1) in the serial baseline, then in
    the finalists best first until one's final accuracy (its last meter.evaluate) is within
    --accuracy-tolerance of the baseline's; these runs are not bounded by --budget-s
    (default: throughput only)"""
