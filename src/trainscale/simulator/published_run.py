"""`trainscale simulate --fit-to TABLE` and `--validate-published`: the simulator fitted on
part of a published scaling table (simulator/fit.py) and checked on the rest."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainscale.simulator.cluster import load_preset
from trainscale.simulator.fit import FIT_SAMPLES, TableFit, fit_table
from trainscale.simulator.options import MonteCarloOptions
from trainscale.simulator.published import load_all, load_table
from trainscale.simulator.run import check_plot_dir, write_plots

TARGET_MEDIAN_ABS_ERROR = 0.10
"""The simulator's target on held-out published points (docs/simulator.md)."""


@dataclass
class PublishedFitResult:
    """The fits of one or more published tables."""

    fits: list[TableFit]
    plots: list[str] = field(default_factory=list)

    def held_out_errors(self) -> list[float]:
        return [abs(p.error) for fit in self.fits for p in fit.held_out]

    def median_abs_error(self) -> float | None:
        """Median |error| over every held-out point of every table."""
        errors = self.held_out_errors()
        return statistics.median(errors) if errors else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": [fit.to_dict() for fit in self.fits],
            "held_out_points": len(self.held_out_errors()),
            "median_abs_error_held_out": self.median_abs_error(),
            "target_median_abs_error": TARGET_MEDIAN_ABS_ERROR,
            "plots": self.plots,
        }


def fit_published(
    table: str | Path,
    *,
    fit_devices: Sequence[int] | None = None,
    samples: int = FIT_SAMPLES,
    seed: int = 0,
    plot_dir: str | Path | None = None,
) -> PublishedFitResult:
    """Fit the simulator to `table` (a shipped table's name or a TOML file) on the points of
    `fit_devices` (default: the table's own split) and predict the rest."""
    return _fit_all([load_table(table)], fit_devices, samples, seed, plot_dir)


def validate_published(
    *, samples: int = FIT_SAMPLES, seed: int = 0, plot_dir: str | Path | None = None
) -> PublishedFitResult:
    """Every shipped table, each fitted on its documented split and checked on the rest."""
    return _fit_all(load_all(), None, samples, seed, plot_dir)


def _fit_all(
    tables: Sequence[Any],
    fit_devices: Sequence[int] | None,
    samples: int,
    seed: int,
    plot_dir: str | Path | None,
) -> PublishedFitResult:
    MonteCarloOptions(samples=samples, seed=seed)  # refuses a sample count out of range
    check_plot_dir(plot_dir)
    fits = []
    for table in tables:
        # Each point is laid out over the nodes it ran on (fit.placed), whatever the preset's.
        cluster = load_preset(table.system)
        fits.append(fit_table(table, cluster, fit_devices=fit_devices, samples=samples, seed=seed))
    result = PublishedFitResult(fits)
    if plot_dir is not None:
        from trainscale.simulator.plots import published_plots

        result.plots = write_plots(plot_dir, published_plots(fits))
    return result
