"""Real data when it can be found, else synthetic: the data choice of commands that measure
many runs (`trainscale bench`, `trainscale recommend`)."""

from __future__ import annotations

from typing import Literal

from trainscale.config.options import RunConfig, RunOptions
from trainscale.errors import DataError

DataChoice = Literal["auto", "real", "synthetic"]
"""real = the dataset files, refused when not found; synthetic = random tensors (throughput
only); auto = real when found, else synthetic, with a warning that says so."""


def prepare_real(
    options: RunOptions, choice: DataChoice
) -> tuple[RunConfig | None, DataError | None]:
    """Prepare `options` (resolved, data located and sized, capacity checked) on real data.

    Returns (config, None) when the data is found. When it is not: with `choice` 'real',
    or a `--data-dir` given (the only place looked in: a mistyped one must not cost a bench
    on synthetic data), the DataError is raised (one line, nothing run); with 'auto' the
    result is (None, the error), and the caller goes on without real data and says why:
    not found (`DataNotFound`), or found and unreadable (any other DataError).
    """
    from trainscale.runner.resolve import prepare

    try:
        return prepare(options.with_(data="real")), None
    except DataError as error:
        if choice == "real" or options.data.data_dir is not None:
            raise
        return None, error
