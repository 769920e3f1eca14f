"""Successive halving over short trial runs, within a time budget, then an accuracy check.

Throughput search. Every candidate trains a few steps on synthetic data without
evaluation (rung 0); the fastest third go on to a rung with three times as many steps, and
so on (10 -> 30 -> 90 timed steps by default). Short trials are noisy, but they only have
to tell a bad setting from a good one; the longer, less noisy trials are spent on the few
settings still in the running (Jamieson & Talwalkar 2016; Li et al. 2018, Hyperband). The
serial 1-core fp32 baseline runs first in every rung, so the speedup is measured at the same
trial length, in the same invocation, minutes apart.

Budget. Before each trial its cost is estimated from what has been measured (a trial's
overhead outside the training clock, and the candidate's own time per sample, or the
slowest time per sample seen when it has not run yet). A trial only starts if the estimate,
plus one accuracy run kept in reserve, fits in what is left of the budget; otherwise the
search stops there, and says so. The ranking is then that of the last complete rung (a rung
cut short does not change it; in rung 0, the candidates measured are ranked). The first
trial always runs.

Accuracy check. A faster setting can train worse: a larger global batch takes fewer, bigger
steps, and bf16 rounds. So the finalists, best first, train a short run on real data (the
same number of samples as the serial fp32 baseline, which runs first), and a finalist whose
test accuracy is more than `accuracy_tolerance` below the baseline's is rejected; the next
one is checked, until one passes. The baseline passes by definition.

A user's own script. Its candidates have no precision or batch (the script decides both),
so its trials' global batch is what they measured: with a per-worker batch it grows with
the workers, which is why candidates are compared in samples/s, never in step time, and a
trial's cost is estimated per step rather than per sample. A script has no short accuracy
run (`accuracy_base` None): its accuracy is checked only on request, by a `FinalistsCheck`
of whole script runs made after the search and outside its budget
(advisor/script_accuracy.py), with the same rule (`accuracy_rejection`).

Busy machine. A throughput trial stored as busy (other work used its cores; see
docs/methodology.md, "Contention") is left out of the ranking unless `include_busy`: the
candidate keeps its last trusted measurement, and a busy baseline trial gives that rung no
speedup. Where every measured throughput trial ran busy, they are ranked anyway and the
recommendation is marked not trusted (`Recommendation.trusted`), naming the busiest other
processes: the same rule as the bench's rounds (metrics/run_flags.py). Accuracy runs are
kept either way: a neighbour slows training, not what it learns.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainscale.advisor.recommendation import Recommendation
from trainscale.advisor.space import Candidate, Space
from trainscale.advisor.trials import (
    Attempt,
    Ranked,
    Rejection,
    RunOne,
    Trial,
    accuracy_options,
    accuracy_rejection,
    throughput_options,
)
from trainscale.config.options import RunOptions
from trainscale.errors import TrainscaleError
from trainscale.hardware.contention import busiest_processes
from trainscale.metrics.run_flags import ran_busy
from trainscale.runner.launch import RunFailed

DEFAULT_RUNG_STEPS = (10, 30, 90)
QUICK_RUNG_STEPS = (5, 15, 45)
DEFAULT_ACCURACY_TOLERANCE = 0.005
"""Half a point of test accuracy. Quarter-epoch `mnist-cnn` runs of the baseline that differ
only in the seed landed within 0.31 points of each other (0.9763 to 0.9794), while a global
batch of 256 at the recipe's lr lost 1.5 points at the same length (0.9643; the figures and
commands are in docs/compare-and-recommend.md): half a point lets the noise through and
stops the damage."""


@dataclass(frozen=True)
class SearchSettings:
    """How long the trials are, how many survive, how much time there is."""

    rung_steps: tuple[int, ...] = DEFAULT_RUNG_STEPS
    """Timed steps of the trials of each rung; the warm-up steps come on top."""
    keep_fraction: float = 1 / 3
    """Share of a rung's candidates that go on to the next (at least one)."""
    warmup_steps: int = 5
    """Untimed warm-up steps of every throughput trial."""
    budget_s: float = 600.0
    """Wall-clock seconds for the whole search, accuracy check included."""
    accuracy_epochs: float = 0.25
    """Length of the accuracy runs, in epochs: the same number of samples for every setting."""
    accuracy_tolerance: float = DEFAULT_ACCURACY_TOLERANCE
    """A finalist is rejected when its test accuracy is lower than the baseline's by more."""
    include_busy: bool = False
    """Rank throughput trials that ran on a busy machine too (by default their samples/s is
    left out: other work on their cores says nothing about the setting)."""

    def __post_init__(self) -> None:
        if not self.rung_steps or any(s < 1 for s in self.rung_steps):
            raise TrainscaleError(f"rung steps must be positive, got {list(self.rung_steps)}")
        if any(b <= a for a, b in zip(self.rung_steps, self.rung_steps[1:], strict=False)):
            # Each rung measures the survivors of the one before longer: its ranking is
            # then worth more than theirs; a shorter rung would rank on less.
            steps = ",".join(map(str, self.rung_steps))
            raise TrainscaleError(f"--rung-steps must grow from rung to rung, got {steps}")
        if not 0 < self.keep_fraction < 1:
            raise TrainscaleError(f"keep fraction must be in (0, 1), got {self.keep_fraction}")
        if self.warmup_steps < 0:
            raise TrainscaleError(f"warm-up steps must be >= 0, got {self.warmup_steps}")
        if not self.budget_s > 0:
            raise TrainscaleError(f"--budget-s must be positive, got {self.budget_s}")
        if not self.accuracy_epochs > 0:
            raise TrainscaleError(f"accuracy epochs must be positive, got {self.accuracy_epochs}")
        if not 0 <= self.accuracy_tolerance < 1:
            raise TrainscaleError(
                f"accuracy tolerance must be a fraction in [0, 1), got {self.accuracy_tolerance}"
            )


FinalistsCheck = Callable[
    [list[Ranked], Attempt, Callable[[str], None]],
    tuple[float | None, Ranked | None, float | None, list[Rejection]],
]
"""An accuracy check made after the search, outside its budget (a script's whole runs,
advisor/script_accuracy.py): given the ranking, the search's `Attempt` and its `note`, it
returns the baseline's accuracy (None: nothing was compared, the ranking stands), the
entry chosen (None: every finalist was rejected), its accuracy, and the rejections."""


class SearchListener:
    """What the search reports as it goes; the CLI prints progress, tests stay silent."""

    def rung_started(self, rung: int, timed_steps: int, candidates: list[Candidate]) -> None:
        """A rung begins: its candidates (the baseline first)."""

    def trial_started(self, candidate: Candidate, kind: str, rung: int | None) -> None:
        """A trial run is about to start."""

    def trial_finished(self, trial: Trial) -> None:
        """A trial run ended (completed or failed)."""

    def note(self, text: str) -> None:
        """Something the user should know (budget stops, rejections)."""


class _Search:
    """The state of one search; `run_search` is the entry point."""

    def __init__(
        self,
        space: Space,
        throughput_base: RunOptions,
        accuracy_base: RunOptions | None,
        settings: SearchSettings,
        run_one: RunOne,
        clock: Callable[[], float],
        listener: SearchListener,
    ) -> None:
        self.space = space
        self.throughput_base = throughput_base
        self.accuracy_base = accuracy_base
        self.settings = settings
        self.run_one = run_one
        self.clock = clock
        self.listener = listener
        self.start = clock()
        self.trials: list[Trial] = []
        self.notes: list[str] = []
        self.reserve_s = 0.0
        self.stopped_by_budget = False
        self.warned_short = False
        self.untrusted = False
        """Every measured throughput trial ran busy: the ranking rests on them."""

    # -- plumbing ------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self.clock() - self.start

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.listener.note(text)

    def attempt(
        self, candidate: Candidate, options: RunOptions, kind: str, rung: int | None
    ) -> Trial:
        self.listener.trial_started(candidate, kind, rung)
        t0 = self.clock()
        try:
            result = self.run_one(options)
        except RunFailed as failure:
            trial = Trial(
                candidate, kind, rung, failure.run_id, self.clock() - t0, error=failure.reason
            )
        except TrainscaleError as error:
            trial = Trial(candidate, kind, rung, None, self.clock() - t0, error=str(error))
        else:
            trial = Trial(
                candidate,
                kind,
                rung,
                result.get("run_id"),
                self.clock() - t0,
                samples_per_s=result.get("samples_per_s"),
                test_accuracy=result.get("test_accuracy"),
                train_time_s=result.get("train_time_s"),
                num_samples=result.get("num_samples"),
                num_steps=result.get("num_steps"),
                global_batch=result.get("global_batch_size"),
                busy=ran_busy(result),
            )
        self.trials.append(trial)
        self.listener.trial_finished(trial)
        return trial

    def measured(self) -> list[Trial]:
        """The throughput trials that measured their training time and samples."""
        return [
            t
            for t in self.trials
            if t.kind == "throughput" and t.ok and t.train_time_s and t.num_samples
        ]

    @staticmethod
    def step_s(candidate: Candidate, trials: list[Trial]) -> float | None:
        """Seconds of one of `candidate`'s steps, as slow as the slowest of `trials`: per
        sample times its global batch; a script's (whose batch is its own) per step."""
        batch = candidate.global_batch_size
        if batch is not None:
            return batch * max((t.train_time_s or 0.0) / (t.num_samples or 1) for t in trials)
        per_step = [(t.train_time_s or 0.0) / t.num_steps for t in trials if t.num_steps]
        return max(per_step) if per_step else None

    def estimate_s(self, candidate: Candidate, total_steps: int) -> float | None:
        """Expected wall time of a throughput trial, or None before anything was measured."""
        measured = self.measured()
        if not measured:
            return None
        overhead = statistics.median(max(0.0, t.wall_s - (t.train_time_s or 0.0)) for t in measured)
        own = [t for t in measured if t.candidate == candidate]
        # An untried candidate is assumed as slow as the slowest seen: better to stop a
        # little early than to overrun the budget.
        step = self.step_s(candidate, own[-1:] or measured)
        return None if step is None else overhead + total_steps * step

    def full_search_s(self) -> float | None:
        """About how long the whole search takes here, every candidate measured: the
        baseline's accuracy run and one finalist's, and every rung's trials, each as slow
        per sample (a script's: per step) as the slowest trial measured (the serial
        baseline, usually), so rather more than less. None before any throughput trial was
        measured."""
        measured = self.measured()
        if not measured:
            return None
        overhead = statistics.median(max(0.0, t.wall_s - (t.train_time_s or 0.0)) for t in measured)
        everyone = [self.space.baseline, *self.space.candidates]
        steps_s = [self.step_s(c, measured) for c in everyone]
        step = max((s for s in steps_s if s is not None), default=None)
        if step is None:
            return None
        settings = self.settings
        total = 2 * self.reserve_s  # the baseline's accuracy run, and one finalist's
        count = len(self.space.candidates)
        for timed in settings.rung_steps:
            steps = timed + settings.warmup_steps
            total += (count + 1) * (overhead + steps * step)  # + the baseline
            count = max(1, math.ceil(count * settings.keep_fraction))
        return total

    def warn_if_short(self) -> None:
        """Once the first throughput trial is measured, before the budget is spent: say so
        when it cannot measure every candidate, and what budget would."""
        if self.warned_short:
            return
        needed = self.full_search_s()
        if needed is None:
            return
        self.warned_short = True
        if needed > self.settings.budget_s:
            self.note(
                f"budget: measuring all {len(self.space.candidates)} candidates takes about "
                f"{round_up_s(needed)} s here (accuracy check {self.reserve_s:.0f} s, kept "
                f"twice); {self.settings.budget_s:.0f} s will measure fewer: "
                f"--budget-s {round_up_s(needed)} measures all"
            )

    def global_batch(self, candidate: Candidate) -> int | None:
        """`candidate`'s global batch: as set, or as its last throughput trial measured it
        (a script's); None when it has none."""
        if candidate.global_batch_size is not None:
            return candidate.global_batch_size
        batches = [
            t.global_batch
            for t in self.trials
            if t.candidate == candidate and t.kind == "throughput" and t.ok and t.global_batch
        ]
        return batches[-1] if batches else None

    def fits(self, cost_s: float | None) -> bool:
        if cost_s is None:
            return True
        return self.elapsed() + cost_s + self.reserve_s <= self.settings.budget_s

    # -- phases --------------------------------------------------------------------------

    def baseline_accuracy(self) -> float | None:
        """Train the baseline's accuracy run first: the reference, and the reserve's size."""
        if self.accuracy_base is None:
            return None
        baseline = self.space.baseline
        options = accuracy_options(baseline, self.accuracy_base, self.settings.accuracy_epochs)
        trial = self.attempt(baseline, options, "accuracy", None)
        if not trial.ok or trial.test_accuracy is None:
            raise TrainscaleError(
                f"the serial baseline's accuracy run failed ({trial.error or 'no accuracy'}); "
                "cannot check accuracy: fix the data or pass --data synthetic"
            )
        # The baseline is the slowest setting, so its accuracy run bounds a finalist's.
        self.reserve_s = trial.wall_s
        return trial.test_accuracy

    def rungs(self) -> tuple[list[Ranked], dict[int, float], int]:
        """Successive halving. Returns (ranking, baseline samples/s per rung, rungs done)."""
        settings = self.settings
        baseline = self.space.baseline
        survivors = list(self.space.candidates)
        last: dict[Candidate, tuple[int, float]] = {}
        baseline_rate: dict[int, float] = {}
        # Busy measurements left out: ranked only where no trusted one is left (the busy
        # rule, metrics/run_flags.py), and then the result says it is not trusted.
        busy_last: dict[Candidate, tuple[int, float]] = {}
        busy_baseline_rate: dict[int, float] = {}
        failed: set[Candidate] = set()
        done = 0
        for rung, timed in enumerate(settings.rung_steps):
            order = [baseline] + [c for c in survivors if c != baseline]
            self.listener.rung_started(rung, timed, order)
            total = timed + settings.warmup_steps
            before = dict(last)
            for candidate in order:
                cost = self.estimate_s(candidate, total)
                if self.trials and not self.fits(cost):
                    self.stopped_by_budget = True
                    untried = order[order.index(candidate) :]
                    self.note(
                        f"budget: stopped in rung {rung} ({timed} steps) before "
                        f"{candidate.label}: about {cost:.0f} s more would pass the "
                        f"{settings.budget_s:.0f} s budget (with {self.reserve_s:.0f} s kept "
                        f"for the accuracy check); {len(untried)} trial(s) of this rung not "
                        "run; the ranking is that of the last complete rung"
                    )
                    break
                options = throughput_options(
                    candidate, self.throughput_base, timed, settings.warmup_steps
                )
                trial = self.attempt(candidate, options, "throughput", rung)
                self.warn_if_short()
                if not trial.ok or not trial.samples_per_s:
                    failed.add(candidate)
                    continue
                if trial.busy and not settings.include_busy:
                    # Its speed is the neighbours' as much as its own: the candidate keeps
                    # its last trusted measurement (ranked below those measured here).
                    if candidate == baseline:
                        busy_baseline_rate[rung] = trial.samples_per_s
                    if candidate in survivors:
                        busy_last[candidate] = (rung, trial.samples_per_s)
                    continue
                if candidate == baseline:
                    baseline_rate[rung] = trial.samples_per_s
                if candidate in survivors:
                    last[candidate] = (rung, trial.samples_per_s)
            if self.stopped_by_budget:
                if rung > 0:
                    # A rung cut short would rank whoever ran first in it (the baseline, then
                    # the best of the previous rung) above the rest on a longer trial: it
                    # does not change the ranking. Its runs stay stored and listed.
                    last = before
                break
            done = rung + 1
            if rung + 1 < len(settings.rung_steps):
                pool = last if any(c in last for c in survivors if c not in failed) else busy_last
                ranked = sorted(
                    (c for c in survivors if c in pool and c not in failed),
                    key=lambda c: (-pool[c][0], -pool[c][1]),
                )
                survivors = ranked[: max(1, math.ceil(len(ranked) * settings.keep_fraction))]
        if not any(c not in failed for c in last) and busy_last:
            self.untrusted = True
            last, baseline_rate = busy_last, {**busy_baseline_rate, **baseline_rate}
        ranking = sorted(
            (Ranked(c, *last[c]) for c in last if c not in failed),
            key=lambda r: (-r.rung, -r.samples_per_s),
        )
        return place_baseline(ranking, baseline, baseline_rate), baseline_rate, done

    def check_accuracy(
        self, ranking: list[Ranked], baseline_accuracy: float
    ) -> tuple[Ranked | None, float | None, list[Rejection]]:
        """The first finalist, best first, that keeps the baseline's accuracy."""
        tolerance = self.settings.accuracy_tolerance
        rejected: list[Rejection] = []
        checked = 0
        if self.accuracy_base is None:  # only called after the baseline's accuracy run
            raise ValueError("no accuracy check without the options of accuracy runs")
        for entry in ranking:
            candidate = entry.candidate
            if candidate == self.space.baseline:
                return entry, baseline_accuracy, rejected
            if checked and not self.fits(0.0):
                self.stopped_by_budget = True
                self.note(
                    f"budget: no time left to check {candidate.label} and the finalists after "
                    "it; falling back to the serial baseline"
                )
                return None, None, rejected
            checked += 1
            options = accuracy_options(candidate, self.accuracy_base, self.settings.accuracy_epochs)
            trial = self.attempt(candidate, options, "accuracy", None)
            reason = accuracy_rejection(trial, baseline_accuracy, tolerance)
            if reason is not None:
                rejected.append(Rejection(candidate, reason, trial.test_accuracy))
                self.note(f"rejected {candidate.label}: {reason}")
                continue
            return entry, trial.test_accuracy, rejected
        return None, None, rejected


def place_baseline(
    ranking: list[Ranked], baseline: Candidate, baseline_rate: dict[int, float]
) -> list[Ranked]:
    """The ranking with the baseline placed after the candidates that beat it and before
    those that do not. The baseline runs in every rung, so each candidate is held against
    the baseline's rate in the candidate's own last rung: one measured slower than the
    baseline there (or one left behind in an earlier rung, however it ranked) never comes
    before it, and the accuracy check stops at the baseline."""
    if not baseline_rate:  # no trusted baseline measurement: nothing to hold them against
        return ranking
    latest = max(baseline_rate)
    others = [r for r in ranking if r.candidate != baseline]
    beats = [r for r in others if r.samples_per_s > baseline_rate.get(r.rung, 0.0)]
    rest = [r for r in others if r not in beats]
    return [*beats, Ranked(baseline, latest, baseline_rate[latest]), *rest]


class AllTrialsFailed(TrainscaleError):
    """Every trial started and failed (each stored failed, with why): a failed search, not a
    mistake in what was asked (the command exits 1, as a failed run does)."""


def run_search(
    space: Space,
    throughput_base: RunOptions,
    accuracy_base: RunOptions | None,
    settings: SearchSettings,
    run_one: RunOne,
    clock: Callable[[], float] = time.monotonic,
    listener: SearchListener | None = None,
    check: FinalistsCheck | None = None,
) -> Recommendation:
    """Search `space` and recommend the fastest candidate that keeps the baseline's accuracy.

    `throughput_base` carries the options shared by throughput trials (workload, synthetic
    data, tag); `accuracy_base` those of accuracy runs (real data, data directory), or None
    to skip the accuracy check (no real data: then nothing is claimed about accuracy).
    `check`, with `accuracy_base` None, is an accuracy check of its own made after the
    search, outside the budget (a script's whole runs); its runs are kept with the trials.
    `run_one` and `clock` are parameters so that tests can drive the search with fakes.
    """
    search = _Search(
        space,
        throughput_base,
        accuracy_base,
        settings,
        run_one,
        clock,
        listener or SearchListener(),
    )
    baseline = space.baseline
    baseline_accuracy = search.baseline_accuracy()
    ranking, baseline_rate, done = search.rungs()
    if not ranking:
        reasons = "; ".join(f"{t.candidate.label}: {t.error}" for t in search.trials if t.error)
        raise AllTrialsFailed(f"every trial failed, nothing to recommend ({reasons[:300]})")

    rejected: list[Rejection] = []
    chosen: Ranked | None = ranking[0]
    best_accuracy: float | None = None
    # The budget bounds the search; a check of its own runs outside it (the user chose it).
    searched_s = search.elapsed()
    if baseline_accuracy is not None:
        chosen, best_accuracy, rejected = search.check_accuracy(ranking, baseline_accuracy)
    elif check is not None:
        baseline_accuracy, chosen, best_accuracy, rejected = check(
            ranking, search.attempt, search.note
        )
        if baseline_accuracy is None:  # nothing compared: the throughput ranking stands
            chosen, best_accuracy = ranking[0], None
    if baseline_accuracy is not None and chosen is None:
        chosen = next((r for r in ranking if r.candidate == baseline), None)
        best_accuracy = baseline_accuracy
        search.note("no finalist kept the baseline's accuracy: recommending the baseline")

    if chosen is None:  # the baseline fell out of the ranking (its trials failed)
        best, best_rate, best_rung = baseline, None, None
    else:
        best, best_rate, best_rung = chosen.candidate, chosen.samples_per_s, chosen.rung
    base_rate = baseline_rate.get(best_rung) if best_rung is not None else None
    speedup = best_rate / base_rate if best_rate and base_rate else None
    best_batch, base_batch = search.global_batch(best), search.global_batch(baseline)
    script = best.global_batch_size is None
    if script and best_batch and base_batch and best_batch != base_batch:
        # A script passes each worker its own batch (DistributedSampler): the global
        # batch grows with the workers, so only samples/s compares settings.
        search.note(
            f"the script's global batch at the recommended setting ({best_batch}) differs "
            f"from the baseline's ({base_batch}): it trains its own batch on each worker, so "
            "the speedup is in samples/s of a different optimisation, "
            + (
                "admitted because the accuracy check passed"
                if baseline_accuracy is not None
                else "and a script's accuracy is not checked"
            )
        )
    elif not script and best_batch != base_batch:
        search.note(
            f"the recommended global batch ({best_batch}) differs from the "
            f"baseline's ({base_batch}): the speedup is in samples/s of a "
            "different optimisation, admitted because the accuracy check passed"
            if baseline_accuracy is not None
            else f"the recommended global batch ({best_batch}) differs from the "
            f"baseline's ({base_batch}) and accuracy was not checked"
        )
    # Every candidate a trial ran for: one measured only on a busy machine was measured,
    # and left out of the ranking for that (the first line says so), not for the budget.
    candidates = set(space.candidates)
    throughput = {t.candidate for t in search.trials if t.kind == "throughput"}
    measured = len(throughput & candidates)  # the baseline counts where it is a candidate
    total = len(candidates)
    needed = search.full_search_s()
    if measured < total and search.stopped_by_budget:
        more = (
            f"a budget of about {round_up_s(needed)} s would measure all"
            if needed is not None
            else "a larger budget would measure more"
        )
        search.note(f"budget: measured {measured} of {total} candidates; {more}")
    elapsed = search.elapsed() if check is None else searched_s
    if elapsed > settings.budget_s:
        search.note(
            f"the search took {elapsed:.0f} s, over the {settings.budget_s:.0f} s budget "
            "(trials took longer than estimated)"
        )
    return Recommendation(
        best=best,
        best_samples_per_s=best_rate,
        best_rung=best_rung,
        baseline=baseline,
        baseline_samples_per_s=base_rate,
        best_global_batch=best_batch,
        baseline_global_batch=base_batch,
        speedup=speedup,
        accuracy_checked=baseline_accuracy is not None,
        baseline_accuracy=baseline_accuracy,
        best_accuracy=best_accuracy,
        ranking=ranking,
        rejected=rejected,
        trials=search.trials,
        rungs_completed=done,
        elapsed_s=elapsed,
        budget_s=settings.budget_s,
        stopped_by_budget=search.stopped_by_budget,
        notes=search.notes,
        include_busy=settings.include_busy,
        trusted=not search.untrusted,
        busiest=[p.text() for p in busiest_processes()] if search.untrusted else [],
        candidates_measured=measured,
        candidates_total=total,
        budget_needed_s=needed,
    )


def round_up_s(seconds: float | None) -> int:
    """A budget to suggest: `seconds` rounded up to the next 60 s."""
    return 60 * math.ceil((seconds or 0.0) / 60)
