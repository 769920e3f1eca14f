"""How long `trainscale bench` measures, declared once: each field is an option whose
docstring is its `--help` text (config/cli.py makes the flags from them); `bench()` in
Python takes the same names as keywords."""

from __future__ import annotations

from dataclasses import dataclass

from trainscale.config.options import option

DEFAULT_STEPS = 100
"""Training steps of a throughput rung, over all its rounds."""
QUICK_STEPS = 30
"""Training steps of a throughput rung with `quick`, over all its rounds."""
DEFAULT_ROUNDS = 5
"""Rounds of the ladder: every rung runs once a round, DEFAULT_STEPS / rounds steps a run."""
QUICK_ROUNDS = 2
"""Rounds of the ladder with `quick`."""


@dataclass(frozen=True, kw_only=True)  # keywords, as bench() in Python takes them
class BenchOptions:
    """The bench's length; None means "the default for --quick"."""

    quick: bool = option(False)
    """30 steps a rung in 2 rounds and no full-recipe accuracy run"""
    steps: int | None = option(None, metavar="N")
    """training steps per throughput rung over all rounds, a whole number >= 2 (default:
    100; --quick 30); each round's run trains its share, the first step untimed"""
    rounds: int | None = option(None, metavar="N")
    """rounds to split each rung's steps over, every rung once a round, each run at least 2
    steps, so fewer where --steps leaves fewer (default: 5; --quick 2); more rounds, a
    narrower interval"""
    max_extra_rounds: int | None = option(None, metavar="N")
    """on a busy machine (other work on the cores), measure up to N more rounds until as
    many rounds as planned are quiet (default: as many as --rounds; 0: never); busy rounds
    are left out of the speedups, and where none is quiet the ratios are shown marked not
    trusted"""
