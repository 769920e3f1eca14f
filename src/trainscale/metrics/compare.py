"""Compare the step times of two settings: ratio of step times, bootstrap interval, rank test.

Pure numpy, seeded: the same samples and seed give the same figures on every machine.

Each side of a comparison is one or more *runs*, each a sequence of timed step times (the
stored step times minus the run's untimed warm-up steps). The figures are the ones a report
shows for a configuration (`metrics.throughput`), so a comparison and a report of the same
runs agree:

- a run's step time is the median of its timed steps, its throughput its global batch over
  that median (over its mean step where the workload's steps do unequal work by design:
  texts of different lengths, `unequal_steps`);
- a side's step time is the median over its runs of each run's step time, and its
  throughput the median over its runs of each run's throughput (with one run: that run's);
- the headline figures are the ratio of the sides' step times B/A and the ratio of their
  throughputs B/A (with an odd number of runs per side, or one, the throughput ratio is
  exactly batch B/batch A over the step-time ratio; with an even number the median of two
  middle runs is their mean, of step times on one side and of throughputs on the other).

The confidence intervals come from a percentile bootstrap that replicates that statistic:

- one run on a side: resample that run's steps with replacement, take their median;
- several runs on a side (repeats): a hierarchical bootstrap, resampling runs first and
  then steps within each chosen run, taking each resampled run's median and then the median
  over the runs (of step times, and of throughputs). Repeats differ from each other by more
  than steps within a run do (where the scheduler placed threads, what else ran, memory
  layout, CPU frequency), and only resampling the runs carries that run-to-run spread into
  the interval. Pooling the steps of every repeat and resampling them as one sample would
  hide it and give an interval that is too narrow.

The difference is called significant when the throughput interval excludes 1.0 and each side
timed at least two steps.

Caveat: consecutive steps of one run are autocorrelated (a noisy neighbour, a frequency
change or a page-cache miss slows several steps in a row), while the bootstrap and the rank
test treat steps as independent draws. For single runs the interval is therefore optimistic:
it describes this pair of runs, not the settings. Repeated runs on each side (e.g. a sweep
with `repeats >= 2`) are what make the interval honest, which is why the hierarchical
bootstrap resamples runs. `lag1_autocorrelation` measures how strongly steps follow each
other, so a caller can say how optimistic a single-run interval is.

The Mann-Whitney U test over the pooled steps is reported beside the bootstrap as a
distribution-free check: the rank-biserial correlation is P(B step > A step) - P(B step <
A step), from -1 (B always faster) to +1 (B always slower).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainscale.config.limits import DEFAULT_RESAMPLES, MAX_RESAMPLES, MIN_RESAMPLES
from trainscale.metrics.throughput import (
    rated_step_time,
    repeats_step_time,
    repeats_throughput,
    throughput,
    timed_step_time,
)

MIN_JUDGED_STEPS = 2
"""Timed steps a side needs before a difference is called significant."""

Statistic = Callable[..., Any]
"""np.median or np.mean: a run's step statistic, taking an optional `axis`."""

_CHUNK_ELEMENTS = 4_000_000
"""Largest resample matrix built at once (32 MB of float64): long runs are done in chunks."""


@dataclass(frozen=True)
class SideSummary:
    """What one side of a comparison holds."""

    num_runs: int
    num_steps: int
    """Timed steps, summed over the runs."""
    median_step_s: float
    """The side's step time: the median over its runs of each run's median timed step."""
    samples_per_step: float
    """Global batch size of the side (1.0 when unknown): turns step time into throughput."""
    samples_per_s: float
    """The side's throughput: the median over its runs of batch / the run's median step (its
    mean step where `unequal_steps`)."""
    run_median_steps_s: list[float]
    """Each run's median timed step, in run order."""
    lag1_autocorrelation: float | None
    """Mean over runs of each run's lag-1 autocorrelation of step times (None if too short)."""
    unequal_steps: bool = False
    """Its steps do unequal work by design: its throughput is over the mean step."""


@dataclass(frozen=True)
class Comparison:
    """B against A. Ratios above 1.0 in step time (below 1.0 in throughput) mean B is slower."""

    a: SideSummary
    b: SideSummary
    step_time_ratio: float
    """B's step time / A's (each the median over its runs of each run's median step)."""
    step_time_ratio_ci: tuple[float, float]
    throughput_ratio: float
    """B's samples/s / A's (each the median over its runs of each run's samples/s); with one
    run a side and no side of unequal steps, (batch B / batch A) / step_time_ratio."""
    throughput_ratio_ci: tuple[float, float]
    confidence: float
    significant: bool
    """The throughput interval excludes 1.0, and each side timed at least two steps (one
    step has no spread to resample: its interval has no width and would exclude 1.0 from
    any two figures)."""
    hierarchical: bool
    """At least one side had several runs and was resampled runs-then-steps."""
    num_resamples: int
    seed: int
    mann_whitney_u: float
    """U statistic of B's steps against A's (pooled over runs)."""
    rank_biserial: float
    """P(B > A) - P(B < A) over pairs of steps: effect size in [-1, 1]."""
    mann_whitney_p: float
    """Two-sided p-value (normal approximation with tie correction; optimistic, see above)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists)."""
        data = asdict(self)
        data["step_time_ratio_ci"] = list(self.step_time_ratio_ci)
        data["throughput_ratio_ci"] = list(self.throughput_ratio_ci)
        return data


def timed_steps(step_times_s: Sequence[float], warmup_steps_excluded: int) -> list[float]:
    """The steps a run's statistics were computed over: all but the untimed warm-up."""
    return list(step_times_s[max(0, int(warmup_steps_excluded)) :])


def lag1_autocorrelation(values: Sequence[float]) -> float | None:
    """Pearson correlation of each step time with the next; None for fewer than 3 steps or
    constant times."""
    x = np.asarray(values, dtype=float)
    if x.size < 3:
        return None
    a, b = x[:-1] - x[:-1].mean(), x[1:] - x[1:].mean()
    denom = math.sqrt(float(a @ a) * float(b @ b))
    return None if denom == 0.0 else float(a @ b) / denom


def mann_whitney(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray
) -> tuple[float, float, float]:
    """(U of b against a, rank-biserial correlation, two-sided p) for two samples.

    U counts pairs (a_i, b_j) with b_j > a_i, ties as one half. The p-value uses the normal
    approximation with the tie correction, which is accurate for the tens to thousands of
    steps a run has; it assumes independent observations.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    n_a, n_b = x.size, y.size
    if n_a == 0 or n_b == 0:
        raise ValueError("mann_whitney needs at least one value on each side")
    pooled = np.concatenate([x, y])
    _, inverse, counts = np.unique(pooled, return_inverse=True, return_counts=True)
    # Average rank of each distinct value (ranks from 1): ties share the mean of their ranks.
    ends = np.cumsum(counts)
    average_rank = ends - (counts - 1) / 2.0
    ranks = average_rank[inverse]
    u_b = float(ranks[n_a:].sum()) - n_b * (n_b + 1) / 2.0
    pairs = n_a * n_b
    rank_biserial = 2.0 * u_b / pairs - 1.0
    n = n_a + n_b
    tie_term = float(np.sum(counts.astype(float) ** 3 - counts)) / (n * (n - 1)) if n > 1 else 0.0
    variance = pairs / 12.0 * ((n + 1) - tie_term)
    if variance <= 0.0:  # every value equal: no evidence of any difference
        return u_b, rank_biserial, 1.0
    z = (u_b - pairs / 2.0) / math.sqrt(variance)
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return u_b, rank_biserial, min(1.0, p)


def bootstrap_run_medians(
    runs: Sequence[Sequence[float]],
    num_resamples: int,
    rng: np.random.Generator,
    statistic: Statistic = np.median,
) -> np.ndarray:
    """Bootstrap replicates of each run's median step (or its `statistic`, np.mean for a
    run rated over its mean step): shape (num_resamples, runs).

    One run: its steps resampled with replacement. Several runs: runs resampled with
    replacement, then steps within each chosen run (a hierarchical bootstrap); row i holds
    the medians of replicate i's chosen runs. Two calls with generators in the same state
    draw the same resamples, whatever the statistic.
    """
    arrays = [np.asarray(run, dtype=float) for run in runs]
    if not arrays or any(array.size == 0 for array in arrays):
        raise ValueError("every run needs at least one timed step")
    if len(arrays) == 1:
        return _bootstrap_one(arrays[0], num_resamples, rng, statistic)[:, None]
    num_runs = len(arrays)
    out = np.empty((num_resamples, num_runs))
    for index in range(num_resamples):
        chosen = rng.integers(0, num_runs, size=num_runs)
        for slot, c in enumerate(chosen):
            picks = rng.integers(0, arrays[c].size, size=arrays[c].size)
            out[index, slot] = statistic(arrays[c][picks])
    return out


def bootstrap_medians(
    runs: Sequence[Sequence[float]], num_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """`num_resamples` bootstrap replicates of a side's step time: the median over the
    (resampled) runs of each run's median (`bootstrap_run_medians`)."""
    return np.median(bootstrap_run_medians(runs, num_resamples, rng), axis=1)


def _bootstrap_one(
    steps: np.ndarray, num_resamples: int, rng: np.random.Generator, statistic: Statistic
) -> np.ndarray:
    n = steps.size
    out = np.empty(num_resamples)
    chunk = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, num_resamples, chunk):
        stop = min(num_resamples, start + chunk)
        picks = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = statistic(steps[picks], axis=1)
    return out


def compare_step_times(
    a_runs: Sequence[Sequence[float]],
    b_runs: Sequence[Sequence[float]],
    *,
    samples_per_step_a: float = 1.0,
    samples_per_step_b: float = 1.0,
    unequal_steps_a: bool = False,
    unequal_steps_b: bool = False,
    confidence: float = 0.95,
    num_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Compare B's timed step times with A's (each side: one or more runs).

    `samples_per_step_*` are the sides' global batch sizes, so that the throughput ratio is
    one of samples per second even when the batches differ (the caller should flag such a
    comparison: it is not like with like). `unequal_steps_*` says a side's steps do unequal
    work by design (texts of different lengths): its runs' throughputs are then over their
    mean steps, as they are stored and reported (`metrics.throughput.rated_step_time`). The
    statistic is the module docstring's (a side's figure is the median over its runs of each
    run's median step, or throughput).
    The two sides are resampled independently, each from its own stream of the seeded
    generator, so the result depends only on the data and `seed`.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if not MIN_RESAMPLES <= num_resamples <= MAX_RESAMPLES:
        raise ValueError(
            f"num_resamples must be in [{MIN_RESAMPLES}, {MAX_RESAMPLES}], got {num_resamples}"
        )
    if not a_runs or not b_runs:
        raise ValueError("each side needs at least one run")
    a_pooled = np.concatenate([np.asarray(r, dtype=float) for r in a_runs])
    b_pooled = np.concatenate([np.asarray(r, dtype=float) for r in b_runs])
    if a_pooled.size == 0 or b_pooled.size == 0 or np.any(a_pooled <= 0) or np.any(b_pooled <= 0):
        raise ValueError("step times must be positive, at least one per run")

    seq_a, seq_b = np.random.SeedSequence(seed).spawn(2)
    boot_a = bootstrap_run_medians(a_runs, num_resamples, np.random.default_rng(seq_a))
    boot_b = bootstrap_run_medians(b_runs, num_resamples, np.random.default_rng(seq_b))
    # A side rated over its mean step: the same resamples (a generator in the same state),
    # each run's mean step.
    rated_a = (
        bootstrap_run_medians(a_runs, num_resamples, np.random.default_rng(seq_a), np.mean)
        if unequal_steps_a
        else boot_a
    )
    rated_b = (
        bootstrap_run_medians(b_runs, num_resamples, np.random.default_rng(seq_b), np.mean)
        if unequal_steps_b
        else boot_b
    )
    tail = (1.0 - confidence) / 2.0 * 100.0

    def interval(ratios: np.ndarray) -> tuple[float, float]:
        low, high = np.percentile(ratios, [tail, 100.0 - tail])
        return float(low), float(high)

    # Each replicate's side figures, as the point estimate takes them from the runs.
    step_ci = interval(np.median(boot_b, axis=1) / np.median(boot_a, axis=1))
    tput_ci = interval(
        np.median(samples_per_step_b / rated_b, axis=1)
        / np.median(samples_per_step_a / rated_a, axis=1)
    )
    side_a = _side(a_runs, samples_per_step_a, unequal_steps_a)
    side_b = _side(b_runs, samples_per_step_b, unequal_steps_b)
    u, rank_biserial, p = mann_whitney(a_pooled, b_pooled)
    return Comparison(
        a=side_a,
        b=side_b,
        step_time_ratio=side_b.median_step_s / side_a.median_step_s,
        step_time_ratio_ci=step_ci,
        throughput_ratio=side_b.samples_per_s / side_a.samples_per_s,
        throughput_ratio_ci=tput_ci,
        confidence=confidence,
        significant=min(a_pooled.size, b_pooled.size) >= MIN_JUDGED_STEPS
        and not (tput_ci[0] <= 1.0 <= tput_ci[1]),
        hierarchical=len(a_runs) > 1 or len(b_runs) > 1,
        num_resamples=num_resamples,
        seed=seed,
        mann_whitney_u=u,
        rank_biserial=rank_biserial,
        mann_whitney_p=p,
    )


def _side(
    runs: Sequence[Sequence[float]], samples_per_step: float, unequal_steps: bool
) -> SideSummary:
    correlations = [c for c in (lag1_autocorrelation(r) for r in runs) if c is not None]
    steps = [[float(t) for t in run] for run in runs]
    medians = [timed_step_time(run) for run in steps]
    rated = [rated_step_time(run, unequal_steps) for run in steps]
    return SideSummary(
        num_runs=len(runs),
        num_steps=sum(len(r) for r in runs),
        median_step_s=repeats_step_time(medians),
        samples_per_step=float(samples_per_step),
        samples_per_s=repeats_throughput([throughput(samples_per_step, r) for r in rated]),
        run_median_steps_s=medians,
        lag1_autocorrelation=float(np.mean(correlations)) if correlations else None,
        unequal_steps=unequal_steps,
    )
