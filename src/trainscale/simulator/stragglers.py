"""Stragglers: each worker's compute time varies, and a synchronous step waits for the slowest.

A worker's compute time in a step is its nominal time times a factor drawn from a lognormal
distribution with median 1 and spread sigma, independently per worker and per step. sigma is
fitted to a serial run's step times from their median and inter-quartile range: for a
lognormal, IQR / median = exp(z sigma) - exp(-z sigma) = 2 sinh(z sigma), with z = 0.6745
the upper quartile of the standard normal.

A data-parallel step's bucket all-reduces cannot start before every worker has the bucket
ready, so the step runs at the pace of its slowest worker: the factor that matters is the
maximum over the workers. It is sampled exactly for any worker count: the maximum of p
standard normals is Phi^-1(U^(1/p)) for U uniform, so a Monte Carlo sample costs the same for
2 or 20,000 workers. The uniforms are stratified (one per slice of (0, 1), jittered with a
seeded generator), so the same inputs give the same prediction and its quantiles are exact
to 1 / samples.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from trainscale.config.limits import DEFAULT_MONTE_CARLO_SAMPLES

UPPER_QUARTILE_Z = NormalDist().inv_cdf(0.75)
DEFAULT_SIGMA = 0.02
"""Spread used when nothing measured one: 2% (a quiet, dedicated device)."""
DEFAULT_SAMPLES = DEFAULT_MONTE_CARLO_SAMPLES


def sigma_from_spread(median: float, iqr: float) -> float:
    """Lognormal sigma whose median and inter-quartile range are `median` and `iqr`."""
    if not median > 0:
        raise ValueError(f"median must be positive, not {median!r}")
    if iqr < 0:
        raise ValueError(f"IQR must be >= 0, not {iqr!r}")
    return math.asinh(iqr / (2.0 * median)) / UPPER_QUARTILE_Z


def max_normal_samples(workers: int, num_samples: int, seed: int = 0) -> np.ndarray:
    """`num_samples` draws of the maximum of `workers` independent standard normals."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers!r}")
    if num_samples < 1:
        raise ValueError(f"need at least one sample, not {num_samples!r}")
    rng = np.random.default_rng(seed)
    # Stratified uniforms, one per equal slice of (0, 1): the sample quantiles then match the
    # distribution's to within 1 / num_samples, so one worker's median factor is 1 to that
    # precision instead of to Monte Carlo noise.
    uniform = (np.arange(num_samples) + rng.random(num_samples)) / num_samples
    # The upper tail 1 - U^(1/p), computed without cancellation for large p.
    tail = -np.expm1(np.log(np.clip(uniform, 1e-300, 1.0)) / workers)
    tail = np.clip(tail, 1e-300, 1.0 - 1e-16)
    normal = NormalDist()
    return np.array([-normal.inv_cdf(float(q)) for q in tail])


def slowest_factor_samples(
    workers: int, sigma: float, num_samples: int = DEFAULT_SAMPLES, seed: int = 0
) -> np.ndarray:
    """Samples of max over `workers` of the compute-time factor exp(sigma Z) (median 1)."""
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, not {sigma!r}")
    if sigma == 0:
        return np.ones(num_samples)
    return np.exp(sigma * max_normal_samples(workers, num_samples, seed))


def mean_factor(sigma: float) -> float:
    """E[exp(sigma Z)] = exp(sigma^2 / 2): one worker's mean factor (the median is 1)."""
    return math.exp(sigma * sigma / 2.0)
