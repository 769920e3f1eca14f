"""Paired comparisons over interleaved rounds: ratios within a round, median across rounds.

Pure numpy, seeded: the same rounds and seed give the same figures on every machine.

On a shared machine the speed of the whole machine drifts by 10-30% from one minute to the
next (other work, frequency changes, the host's neighbours). Two settings measured minutes
apart differ by that drift as well as by what sets them apart, and a single comparison can
give a confident wrong verdict. So settings are measured in *rounds*: every setting once,
back to back (A B C, then B C A, ...), and each ratio B/A is taken *within* a round, where
both sides saw nearly the same machine. The drift divides out of each ratio; what is left
varies from round to round, and that spread is what the interval shows.

- the ratio of a round: B's measurement / A's measurement in that round;
- the figure: the median of those ratios over the rounds;
- its interval: a percentile bootstrap over rounds (resample the rounds' ratios with
  replacement, take the median, read the 2.5th and 97.5th percentiles for 95%), seeded, in
  the style of `metrics.compare`;
- a round where A or B has no measurement (its run failed) is dropped for that pair only;
- a round where A or B ran on a busy machine (`busy`) is dropped for that pair too, and the
  figure rests on the quiet rounds; where no quiet round is left, the figure is taken over
  the busy rounds and marked not trusted, with no verdict (the busy rule,
  `metrics.run_flags`);
- the verdict: B is faster (or slower) only where the interval excludes 1.0; otherwise "no
  difference measurable here". One round gives no interval and no verdict. With fewer
  than `FEW_ROUNDS` rounds the bootstrap can only pick among a handful of ratios, so the
  interval is about the range of the rounds: wide, and said so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from trainscale.config.limits import DEFAULT_RESAMPLES, MAX_RESAMPLES, MIN_RESAMPLES
from trainscale.metrics.compare import bootstrap_medians
from trainscale.metrics.run_flags import NOT_TRUSTED

Measure = Literal["throughput", "step_time"]
"""What a round holds per setting: higher is faster (throughput) or lower is (step time)."""

FEW_ROUNDS = 5
"""Below this many rounds the interval is wide, and the figures say so."""

NO_DIFFERENCE = "no difference measurable here"
"""The verdict where the interval holds 1.0 (or there is no interval)."""


@dataclass(frozen=True)
class PairedRatio:
    """B against A over rounds: B/A within each round, median and interval across rounds."""

    a: str
    b: str
    measure: Measure
    ratios: tuple[float, ...]
    """B/A of every round that measured both, in round order."""
    rounds_used: tuple[int, ...]
    """Index of the round each ratio comes from (rounds missing A or B are left out)."""
    median: float | None
    """Median of `ratios`; None when no round measured both."""
    ci: tuple[float, float] | None
    """Bootstrap interval of the median over rounds; None with fewer than 2 rounds."""
    confidence: float
    num_resamples: int
    seed: int
    direction: Literal["faster", "slower"] | None
    """Whether B is faster or slower than A: set only where the interval excludes 1.0 and
    the figure is trusted."""
    trusted: bool = True
    """False where every round the figure rests on had a run on a busy machine."""
    busy_rounds: int = 0
    """Rounds that measured both settings with a run on a busy machine: left out of the
    figure where it is trusted, the whole of it where it is not."""

    @property
    def num_rounds(self) -> int:
        """Rounds that measured both settings."""
        return len(self.ratios)

    @property
    def few_rounds(self) -> bool:
        """Fewer than `FEW_ROUNDS` rounds: the interval is wide."""
        return self.num_rounds < FEW_ROUNDS

    @property
    def verdict(self) -> str:
        """'B is faster', 'B is slower', 'no difference measurable here', or
        'not trusted: busy machine'."""
        if not self.trusted:
            return NOT_TRUSTED
        return NO_DIFFERENCE if self.direction is None else f"{self.b} is {self.direction}"

    def verdict_against(self, what: str) -> str:
        """The verdict as a table cell: 'faster than WHAT', 'slower than WHAT' or no
        difference (or 'not trusted: busy machine')."""
        if not self.trusted:
            return NOT_TRUSTED
        return NO_DIFFERENCE if self.direction is None else f"{self.direction} than {what}"

    @property
    def rounds_note(self) -> str:
        """How many rounds the figure rests on, and what that means for the interval."""
        n = self.num_rounds
        if n == 0:
            return "no round measured both settings"
        if not self.trusted:
            return f"{n} round{'s' if n > 1 else ''}, every one on a busy machine"
        if n == 1:
            text = "1 round: no interval"
        elif self.few_rounds:
            text = f"{n} rounds: with fewer than {FEW_ROUNDS} rounds the interval is wide"
        else:
            text = f"{n} rounds"
        if self.busy_rounds:
            text += f"; {self.busy_rounds} busy round(s) left out"
        return text

    def text(self, spec: str = ".2f", suffix: str = "x") -> str:
        """'1.62x [1.41, 1.80]' (the median and its interval), '1.62x' with one round, '-'
        with none."""
        if self.median is None:
            return "-"
        text = format(self.median, spec) + suffix
        if self.ci is not None:
            text += f" [{format(self.ci[0], spec)}, {format(self.ci[1], spec)}]"
        return text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "a": self.a,
            "b": self.b,
            "measure": self.measure,
            "ratios": list(self.ratios),
            "rounds_used": list(self.rounds_used),
            "median": self.median,
            "ci": None if self.ci is None else list(self.ci),
            "num_rounds": self.num_rounds,
            "confidence": self.confidence,
            "num_resamples": self.num_resamples,
            "seed": self.seed,
            "verdict": self.verdict,
            "trusted": self.trusted,
            "busy_rounds": self.busy_rounds,
        }


def paired_ratio(
    rounds: Sequence[Mapping[str, float | None]],
    a: str,
    b: str,
    *,
    measure: Measure = "throughput",
    confidence: float = 0.95,
    num_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    busy: Sequence[Mapping[str, bool]] | None = None,
) -> PairedRatio:
    """B against A from `rounds`, each a mapping setting -> measurement made back to back.

    A round whose A or B is missing, None or NaN (a failed run) is dropped for this pair.
    `busy`, round by round beside `rounds`, says which settings ran on a busy machine: a
    round where A or B did is dropped too while a quiet round measured both; with none, the
    figure is taken over the busy rounds and is not trusted (no verdict).
    Measurements must otherwise be positive. `measure` says which way is faster: a
    throughput ratio above 1 means B is faster, a step-time ratio above 1 that B is slower.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if not MIN_RESAMPLES <= num_resamples <= MAX_RESAMPLES:
        raise ValueError(
            f"num_resamples must be in [{MIN_RESAMPLES}, {MAX_RESAMPLES}], got {num_resamples}"
        )
    if measure not in ("throughput", "step_time"):
        raise ValueError(f"measure must be 'throughput' or 'step_time', got {measure!r}")
    quiet: list[tuple[int, float]] = []
    noisy: list[tuple[int, float]] = []
    for index, measured in enumerate(rounds):
        value_a, value_b = _value(measured, a), _value(measured, b)
        if value_a is None or value_b is None:
            continue
        marks = busy[index] if busy is not None and index < len(busy) else {}
        kept = noisy if marks.get(a) or marks.get(b) else quiet
        kept.append((index, value_b / value_a))
    is_trusted = bool(quiet) or not noisy
    chosen = quiet if is_trusted else noisy
    used = [index for index, _ in chosen]
    ratios = [ratio for _, ratio in chosen]
    median = float(np.median(ratios)) if ratios else None
    ci = None
    if len(ratios) >= 2:
        rng = np.random.default_rng(seed)
        replicates = bootstrap_medians([ratios], num_resamples, rng)
        tail = (1.0 - confidence) / 2.0 * 100.0
        low, high = (float(v) for v in np.percentile(replicates, [tail, 100.0 - tail]))
        ci = (low, high)
    return PairedRatio(
        a=a,
        b=b,
        measure=measure,
        ratios=tuple(ratios),
        rounds_used=tuple(used),
        median=median,
        ci=ci,
        confidence=confidence,
        num_resamples=num_resamples,
        seed=seed,
        direction=_direction(ci, measure) if is_trusted else None,
        trusted=is_trusted,
        busy_rounds=len(noisy),
    )


def _value(measured: Mapping[str, float | None], name: str) -> float | None:
    value = measured.get(name)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"measurement of {name!r} must be a positive number, got {value!r}")
    return float(value)


def _direction(
    ci: tuple[float, float] | None, measure: Measure
) -> Literal["faster", "slower"] | None:
    if ci is None or ci[0] <= 1.0 <= ci[1]:
        return None
    above = ci[0] > 1.0
    # A throughput ratio above 1 is B faster; a step-time ratio above 1 is B slower.
    return "faster" if above == (measure == "throughput") else "slower"
