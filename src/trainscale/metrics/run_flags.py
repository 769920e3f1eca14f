"""Marks a stored run earns from its own measurements: stalls and a busy machine. Pure.

A run is judged from its stored summary, so old and new runs, reports, tables, compare and
recommend all mark it the same way:

- **stalls**: the mean timed step is more than `STALL_RATIO` times the median timed step.
  The headline figures use the median (docs/methodology.md), which a few long stalls do not
  move; the mean, which they do, is shown beside it wherever a run is flagged.
- **busy**: the contention sampler judged that other work used the machine while the run
  trained (`summary["contention"]["verdict"] == "busy"`). Such a run's speed says as much
  about the neighbours as about the setting.

The busy rule, the same in every command (docs/methodology.md, "Contention"):

1. a busy run's figures are always kept and shown, marked `busy`;
2. no verdict (faster, slower, significant) rests on a busy run. Where settings were
   measured in paired rounds (`metrics.paired`: the bench, a sweep's repeats, reports), a
   round in which either side ran busy is left out of that pair and the verdict stands on
   the quiet rounds; where no quiet round is left, the ratio over the busy rounds is shown
   with `NOT_TRUSTED` in place of a verdict;
3. a comparison that is not paired (`trainscale compare`, a plain ratio of medians) with a
   busy run on either side gets `NOT_TRUSTED` in place of its verdict (`judged`);
4. what is fitted or ranked from runs (the simulator's calibration, `recommend`'s ranking)
   leaves busy runs out and says how many; where nothing quiet is left, the busy runs are
   used and the result is marked `NOT_TRUSTED`.

A run whose verdict is `unknown` (no /proc/stat, an external launcher) is not busy: nothing
was seen against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trainscale.metrics.stats import is_positive_number

STALL_RATIO = 1.10
"""Mean timed step over median timed step above which a run is flagged as having stalls."""

STALLS = "stalls"
BUSY = "busy"


def mean_over_median(summary: Mapping[str, Any]) -> float | None:
    """The run's mean timed step over its median timed step; None where either is unknown."""
    mean, median = summary.get("step_time_s_mean"), summary.get("step_time_s_median")
    if not (is_positive_number(mean) and is_positive_number(median)):
        return None
    return float(mean) / float(median)


def has_stalls(summary: Mapping[str, Any]) -> bool:
    """Whether a few long steps pull the run's mean step well above its median. Not judged
    for a run whose steps do unequal work by design (`unequal_steps`: texts of different
    lengths), whose long steps are its long batches."""
    if summary.get("unequal_steps"):
        return False
    ratio = mean_over_median(summary)
    return ratio is not None and ratio > STALL_RATIO


def ran_busy(summary: Mapping[str, Any]) -> bool:
    """Whether other work was found using the machine while the run trained: its stored
    summary's contention verdict (a probe's stored result has one too)."""
    contention = summary.get("contention")
    return isinstance(contention, Mapping) and contention.get("verdict") == "busy"


NOT_TRUSTED = "not trusted: busy machine"
"""What stands in the place of a verdict that would rest on a busy run (rule 2 and 3)."""


def busy_count(summaries: Iterable[Mapping[str, Any]]) -> int:
    """How many of these runs' summaries say they ran on a busy machine."""
    return sum(ran_busy(summary) for summary in summaries)


def trusted(*groups: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a figure resting on these groups of runs' summaries may carry a verdict: no
    run of any group ran busy."""
    return not any(busy_count(group) for group in groups)


def judged(verdict: str, *groups: Iterable[Mapping[str, Any]]) -> str:
    """`verdict` where no run of `groups` ran busy, else `NOT_TRUSTED` (the busy rule, 3)."""
    return verdict if trusted(*groups) else NOT_TRUSTED


def run_flags(summary: Mapping[str, Any]) -> list[str]:
    """The marks a run's summary earns, in a fixed order ([] for a clean run)."""
    return [name for name, on in ((STALLS, has_stalls(summary)), (BUSY, ran_busy(summary))) if on]


def stall_figures(summary: Mapping[str, Any]) -> tuple[float, float] | None:
    """(mean step s, median step s) of a run with stalls; None for a run without."""
    if not has_stalls(summary):
        return None
    return float(summary["step_time_s_mean"]), float(summary["step_time_s_median"])


def stall_text(summary: Mapping[str, Any]) -> str | None:
    """'stalls: mean step 120.6 ms vs median 33.0 ms' for a run with stalls, else None: the
    words every table, report and comparison uses for one run."""
    figures = stall_figures(summary)
    return None if figures is None else f"{STALLS}: {_mean_vs_median(*figures)}"


def stalls_note(summaries: Sequence[Mapping[str, Any]]) -> str | None:
    """What a configuration's runs say of stalls, None when none stalled: 'stalls: mean step
    120.6 ms vs median 33.0 ms in 1 of 3 runs' (with several, the worst run's figures).

    Both figures are the stalled run's own: its mean is measured against its median (the
    row's median over the runs, beside another run's mean, could read as a mean below it)."""
    stalled = [f for f in (stall_figures(s) for s in summaries) if f is not None]
    if not stalled:
        return None
    mean, median = max(stalled, key=lambda f: f[0] / f[1])
    worst = "" if len(stalled) == 1 else "worst "
    return (
        f"{STALLS}: {worst}{_mean_vs_median(mean, median)} "
        f"in {len(stalled)} of {len(summaries)} run{'' if len(summaries) == 1 else 's'}"
    )


def all_steps_timed_text(result: Mapping[str, Any]) -> str | None:
    """What a run no longer than its warm-up says of its step time, which then counts every
    step, the first one's one-off costs (set-up, allocation) included; None otherwise.
    `result` is the run's `--json` object (its summary keys, and its config)."""
    warmup = (result.get("config") or {}).get("warmup_steps_untimed")
    if not warmup or result.get("warmup_steps_excluded") or not result.get("num_steps"):
        return None
    return (
        f"every step timed: the run's {result['num_steps']} step(s) are no more than its "
        f"{warmup} warm-up steps (--warmup-steps), so the first step's one-off costs are in "
        "its step time"
    )


def _mean_vs_median(mean_s: float, median_s: float) -> str:
    return f"mean step {_ms(mean_s)} ms vs median {_ms(median_s)} ms"


def _ms(seconds: float) -> str:
    """Milliseconds to a tenth, or to a thousandth below 1 ms (a stall of sub-millisecond
    steps read 'mean 0.2 ms vs median 0.2 ms')."""
    ms = seconds * 1000
    return f"{ms:.1f}" if ms >= 1 else f"{ms:.3f}"
