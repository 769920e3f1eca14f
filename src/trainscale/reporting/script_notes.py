"""What a script run's summary says beyond the usual figures, in words: how long its steps
waited for their data (and the diagnosis of a script whose model waits for it), its time to
target (or that it was given none), where its ranks disagreed, and which frameworks it used.
`trainscale run`, `runs show`, `runs list` and reports all word them here, so they say the
same thing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainscale.results.script_figures import ScriptFigures

INPUT_BOUND_SHARE = 0.10
"""A data wait above this share of the step time is worth the user's attention: the model
then stands idle for its data on one step in ten or more."""

INPUT_BOUND_ADVICE = (
    "input-bound, the model waits for its data; try more DataLoader workers (num_workers) "
    "with cores to run on (they share the worker's pinned cores: give it more cores than "
    "threads, e.g. --threads-per-worker 1 on 2), persistent_workers=True, or lighter "
    "per-sample transforms"
)
"""What to try. DataLoader workers are processes forked from the training worker and inherit
its core set, so more of them help only where that set has cores its threads leave free."""


def is_input_bound(summary: Mapping[str, Any]) -> bool:
    """Whether a script run's steps waited for their data more than `INPUT_BOUND_SHARE` of
    their time (False for a built-in run, which records no data wait)."""
    share = ScriptFigures.of(summary).data_wait_share
    return share is not None and share > INPUT_BOUND_SHARE


def data_wait_text(summary: Mapping[str, Any]) -> str | None:
    """'12.0% of the step time (median 3.1 ms a step)' for a script run, with what to try
    when the script is input-bound; None for a run that records no data wait."""
    figures = ScriptFigures.of(summary)
    if figures.data_wait_share is None:
        return None
    wait_ms = (figures.data_wait_s_median or 0.0) * 1000
    text = f"{figures.data_wait_share:.1%} of the step time (median {wait_ms:.1f} ms a step)"
    return f"{text}: {INPUT_BOUND_ADVICE}" if is_input_bound(summary) else text


def data_wait_line(result: Mapping[str, Any]) -> str | None:
    """'  data wait: 12.0% of the step time (median 3.1 ms a step)', the line a script run
    adds to its result, with the advice when it is input-bound; None for a built-in run."""
    text = data_wait_text(result)
    return None if text is None else f"  data wait: {text}"


def time_to_target_text(summary: Mapping[str, Any]) -> str:
    """'time to target: 12.3 s (training clock)', or 'not reached'; for a script run given
    no --target-accuracy, that it has none (its stored target, 1.0, is a stand-in)."""
    if summary.get("target_accuracy_given") is False:
        return "no time to target: no --target-accuracy given"
    seconds = summary.get("time_to_target_s")
    reached = f"{seconds:.1f} s" if isinstance(seconds, (int, float)) else "not reached"
    return f"time to target: {reached} (training clock)"


def disagreement_text(summary: Mapping[str, Any]) -> str | None:
    """What the ranks of a script run disagreed on, and what it means for its figures, as
    one sentence; None where they agreed (or the run is no script run)."""
    figures = ScriptFigures.of(summary)
    parts = []
    if figures.samples_disagree_steps is not None:
        medians = ", ".join(str(v) for v in figures.samples_per_worker_median)
        parts.append(
            f"the ranks passed different samples= in {figures.samples_disagree_steps} "
            f"step(s) (median per rank: {medians}); the throughput counts their sum, "
            f"{figures.global_batch_measured} samples a step, so it is too high if a "
            "rank passed the global batch instead of its own part: pass each rank's own "
            "samples, len(x) of its batch"
        )
    steps = figures.steps_per_worker
    if steps:
        parts.append(
            f"the ranks took different numbers of steps ({', '.join(map(str, steps))}): the "
            f"step time and throughput cover the {min(steps)} steps every rank took, the "
            "other steps are left out"
        )
    return "; ".join(parts) if parts else None


def threads_text(summary: Mapping[str, Any]) -> str | None:
    """What a script that set its own intra-op threads did to the run's setting, as one
    sentence; None where it kept the planned threads."""
    changed = summary.get("threads_set_by_script")
    if not isinstance(changed, Mapping):
        return None
    used = ", ".join(str(t) for t in changed.get("per_worker") or [])
    return (
        f"the script set its own intra-op threads ({used} per worker), not the planned "
        f"{changed.get('planned')}: the run measured its setting, not the one stored, and "
        "may oversubscribe its cores (leave torch.set_num_threads to trainscale, or give "
        "--threads-per-worker)"
    )


def frameworks_text(summary: Mapping[str, Any]) -> str | None:
    """'pytorch 2.5.1, jax 0.4.30': the frameworks a script run used (None when not
    recorded, as for a built-in run, whose framework is its config's)."""
    seen = ScriptFigures.of(summary).frameworks
    if not seen:
        return None
    return ", ".join(f"{name} {ver}" if ver else name for name, ver in seen.items())
