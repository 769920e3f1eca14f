"""What `trainscale emulate` can be asked beside the run options, declared once: each field
is an option whose docstring is its `--help` text (config/cli.py makes the flags)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from typing import Literal

from trainscale.config.options import option
from trainscale.config.values import comma_whole_numbers
from trainscale.errors import ConfigError

Mode = Literal["sync", "async", "local-sgd"]
MODES: tuple[str, ...] = ("sync", "async", "local-sgd")
DEFAULT_LOCAL_STEPS = 8
"""Local steps between averagings for local SGD (Lin et al. 2020 use H in 2..16)."""
DEFAULT_STALENESS_SPREAD = 0.2
"""Sigma of the lognormal compute time of one gradient (mean 1): about +-20% jitter."""


@dataclass(frozen=True, kw_only=True)
class EmulationOptions:
    """emulation: the worker counts to emulate and how they would optimise (None: the
    default for the mode)."""

    workers: tuple[int, ...] = option(MISSING, metavar="N[,N...]", parse=comma_whole_numbers)
    """worker counts to emulate (each >= 1), one run each, e.g. 1,2,4,8; async and local-sgd
    hold a gradient or a model replica per worker, so memory bounds N"""
    mode: Mode = option(MISSING)
    """sync (DDP), async (parameter server, stale gradients) or local-sgd (periodic
    averaging)"""
    per_worker_batch_size: int | None = option(None, metavar="B")
    """each worker's batch, from 1 to a worker's share of the training set (default: the
    workload's reference batch)"""
    local_steps: int | None = option(None, metavar="H")
    """local-sgd: local steps between averagings, >= 1 (default: 8)"""
    staleness_spread: float | None = option(None, metavar="X")
    """async: sigma (>= 0) of the lognormal compute time of a gradient, mean 1; 0 = equal
    times (default: 0.2)"""
    staleness_aware_lr: bool = option(False)
    """async: divide each update's lr by its staleness (Zhang et al. 2016)"""

    def __post_init__(self) -> None:
        # The per-N checks (mode, batch, the mode's own options) are `spec.check_spec`'s;
        # the list itself is checked here, where it is whole.
        counts = list(self.workers)
        if not counts:
            raise ConfigError("--workers needs at least one worker count, e.g. 1,2,4,8")
        for count in counts:
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise ConfigError(f"--workers must be whole numbers >= 1, got {count!r}")
            if counts.count(count) > 1:
                raise ConfigError(f"--workers lists {count} twice")
