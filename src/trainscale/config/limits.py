"""Caps on how much work the statistics options may ask for: product decisions, kept here.

A count of resamples or Monte Carlo samples has a size beyond which the answer no longer
changes and only time and memory go; a typo of a few zeros should cost one line, not an
hour or the machine's memory. The machine-dependent limits (memory, worker processes) are
in `resources.py`, the sweep's run cap is `sweep.spec.MAX_RUNS`; docs/methodology.md lists
them all. Importing this module is cheap (no numpy), so help texts can quote the caps.
"""

from __future__ import annotations

from trainscale.errors import ConfigError

DEFAULT_RESAMPLES = 4000
"""Bootstrap resamples: enough for stable 2.5th/97.5th percentiles (Efron & Tibshirani
suggest at least 1000 for percentile intervals)."""
MIN_RESAMPLES = 100
MAX_RESAMPLES = 1_000_000
"""Most bootstrap resamples of `trainscale compare`. The percentile interval is stable to a
fraction of a percent from a few thousand; with several runs a side every resample draws
each run's steps in Python, so a million already takes minutes."""

DEFAULT_MONTE_CARLO_SAMPLES = 2000
MAX_MONTE_CARLO_SAMPLES = 100_000
"""Most Monte Carlo samples per prediction of `trainscale simulate` and
`predict-time-to-accuracy`. The samples are stratified, so their quantiles match the
distribution's to within 1 / samples (0.05% at the default); every sample costs an inverse
normal CDF in Python, about a tenth of a second per prediction at this cap, and a
validation makes one prediction per stored run."""


MAX_SEED = 2**32 - 1
"""Largest `--seed`: each worker derives its generators' seeds from it (times a constant,
plus the epoch or the rank), which must stay within the 64 bits a generator takes."""

MAX_STEPS = 10**9
"""Most optimizer steps of one run (given, or epochs x steps per epoch): a billion steps at a
millisecond each is eleven days; more is a typo."""

MAX_EPOCHS = 10**6
"""Most `--epochs` of one run, for the same reason (and epochs x steps per epoch stays a
number a run can count)."""

MAX_BUCKET_CAP_MB = 1024 * 1024
"""Largest DDP gradient bucket, in MiB (a TiB): larger than any model's gradients."""


def check_count(option: str, value: int, low: int, high: int, why: str) -> None:
    """ConfigError unless low <= value <= high, in one line: '--option must be at least
    low' or '--option must be at most high (why)'."""
    if value < low:
        raise ConfigError(f"{option} must be at least {low}, got {value}")
    if value > high:
        raise ConfigError(f"{option} must be at most {high:,} ({why}), got {value}")
