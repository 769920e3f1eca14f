"""Where a step's time goes: data, forward, backward, optimizer, exposed communication.

Recorded on sampled steps only (every `every`-th step after the warm-up), by taking clock
marks between the phases: on the CPU four perf_counter readings, on a GPU four CUDA events,
so a sampled step costs next to nothing more than any other (see docs/benchmarks.md for the
measured overhead).

Exposed communication is the part of the gradient all-reduce that backward compute did not
hide. DDP overlaps the all-reduce of each gradient bucket with the rest of backward and then
waits for the last ones before `backward()` returns. A communication hook marks the moment
each bucket is ready; the time from the last bucket's mark (backward compute done) to the end
of `backward()` is communication the step waited for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from trainscale.metrics import stats
from trainscale.train.timing import StepClock

PHASES = ("data", "forward", "backward", "optimizer")


class Breakdown:
    """Marks of the sampled steps of one worker, and their per-phase medians."""

    def __init__(self, clock: StepClock, every: int, first_step: int):
        self.clock = clock
        self.every = every
        self.first_step = first_step
        self._current: dict[str, Any] | None = None
        self._steps: list[dict[str, Any]] = []

    def sampled(self, step: int) -> bool:
        """Whether `step` (0-based) is one whose phases are recorded."""
        if self.every <= 0 or step < self.first_step:
            return False
        return (step - self.first_step) % self.every == 0

    def begin(self, start_mark: Any) -> None:
        self._current = {"start": start_mark, "marks": [], "bucket_ready": None}

    def mark(self, phase: str) -> None:
        """The phase `phase` ends now (a phase may recur: one per micro-batch)."""
        if self._current is not None:
            self._current["marks"].append((phase, self.clock.mark()))

    def bucket_ready(self) -> None:
        """Called by the communication hook as each gradient bucket becomes ready."""
        if self._current is not None:
            self._current["bucket_ready"] = self.clock.mark()

    def end(self) -> None:
        if self._current is not None:
            self._steps.append(self._current)
            self._current = None

    @property
    def num_sampled_steps(self) -> int:
        """How many steps were sampled (the same steps on every rank)."""
        return len(self._steps)

    def medians_s(self) -> dict[str, float | None]:
        """Median seconds per phase over the sampled steps (settles the clock first).

        Seconds only, keyed by phase: `exposed_comm` is None when it was not measured (one
        worker, or no hook); how many steps were sampled is `num_sampled_steps`.
        """
        if not self._steps:
            return {}
        self.clock.settle()
        seconds: dict[str, list[float]] = {phase: [] for phase in (*PHASES, "exposed_comm")}
        for step in self._steps:
            totals = dict.fromkeys(PHASES, 0.0)
            previous = step["start"]
            for phase, mark in step["marks"]:
                totals[phase] += self.clock.seconds(previous, mark)
                previous = mark
            for phase in PHASES:
                seconds[phase].append(totals[phase])
            if step["bucket_ready"] is not None:
                # The last backward ends after the last bucket's all-reduce is done.
                backward_end = [m for phase, m in step["marks"] if phase == "backward"][-1]
                exposed = self.clock.seconds(step["bucket_ready"], backward_end)
                seconds["exposed_comm"].append(max(0.0, exposed))
        out: dict[str, float | None] = {
            phase: stats.median(values) for phase, values in seconds.items() if values
        }
        out.setdefault("exposed_comm", None)
        return out


def slowest_breakdown(per_rank: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The slowest rank's medians: those of the rank whose phases add up to the most.

    One rank's, whole, rather than each phase's largest over ranks: under DDP a slow rank's
    longer compute is a fast rank's longer wait in the all-reduce, so the per-phase largest
    would count the imbalance twice and add up to more than any step took.
    """
    recorded = [b for b in per_rank if b]
    if not recorded:
        return None

    def total_s(medians: Mapping[str, Any]) -> float:
        return sum(medians.get(phase) or 0.0 for phase in PHASES)

    slowest: Mapping[str, Any] = max(recorded, key=total_s)
    return dict(slowest)


def breakdown_fields(
    per_rank: Sequence[Mapping[str, Any]], num_sampled_steps: int, comm_marked: bool
) -> dict[str, Any]:
    """The run summary's breakdown keys, from every rank's `Breakdown.medians_s()`.

    `breakdown_s`: the slowest rank's median seconds per phase, and nothing but seconds
    (None when no step was sampled; `exposed_comm` None unless the communication hook
    marked it). `breakdown_sampled_steps`: how many steps those medians are over.
    """
    seconds = slowest_breakdown(per_rank)
    if seconds is not None and not comm_marked:
        seconds["exposed_comm"] = None
    return {"breakdown_s": seconds, "breakdown_sampled_steps": num_sampled_steps}


def timed_allreduce_hook(state: Breakdown, bucket):  # noqa: ANN201
    """DDP's default all-reduce, plus a mark when the bucket is ready (see module doc).

    No annotations on purpose: DDP checks a hook's annotations against real types, and this
    module's annotations are strings (postponed evaluation).
    """
    state.bucket_ready()
    # None is the default process group, which torch's annotation leaves out.
    return default_hooks.allreduce_hook(None, bucket)  # type: ignore[arg-type]
