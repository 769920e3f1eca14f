"""What a script run's summary records beyond the usual figures, typed: its data wait, where
its ranks disagreed, and the frameworks it used.

Read from a stored summary or from a run's live result alike (`ScriptFigures.of`): a value
that is missing or not of its type is not recorded (a built-in run records none of them, a
store may have been edited by hand), so the words `reporting/script_notes.py` makes of them
never fail on a value they cannot use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainscale.results.stored_settings import as_number, as_whole, is_number


@dataclass(frozen=True)
class ScriptFigures:
    """A script run's data wait, its ranks' disagreements and its frameworks."""

    data_wait_share: float | None = None
    """The median step's wait for its next batch, as a share of the step."""
    data_wait_s_median: float | None = None
    """That wait, in seconds."""
    samples_disagree_steps: int | None = None
    """Steps in which the ranks passed different samples=; None where they agreed."""
    samples_per_worker_median: tuple[float, ...] = ()
    """Each rank's median samples=, as recorded (whole numbers stay whole)."""
    global_batch_measured: float | None = None
    """The sum of the ranks' samples= a step: what the throughput counts."""
    steps_per_worker: tuple[int, ...] = ()
    """Each rank's steps, where they took different numbers of them (else empty)."""
    frameworks: Mapping[str, str | None] = field(default_factory=dict)
    """The frameworks its ranks used, with their versions."""

    @classmethod
    def of(cls, summary: Mapping[str, Any]) -> ScriptFigures:
        """The script figures of a summary or a live result."""
        steps = tuple(s for s in _list(summary, "steps_per_worker") if as_whole(s) is not None)
        seen = summary.get("frameworks")
        return cls(
            data_wait_share=as_number(summary.get("data_wait_share")),
            data_wait_s_median=as_number(summary.get("data_wait_s_median")),
            samples_disagree_steps=(
                as_whole(summary.get("samples_disagree_steps"))
                if summary.get("samples_disagree") is True
                else None
            ),
            samples_per_worker_median=tuple(
                v for v in _list(summary, "samples_per_worker_median") if is_number(v)
            ),
            global_batch_measured=_as_given(summary.get("global_batch_measured")),
            steps_per_worker=steps if summary.get("steps_disagree") is True else (),
            frameworks=(
                {str(name): (str(ver) if ver else None) for name, ver in seen.items()}
                if isinstance(seen, Mapping)
                else {}
            ),
        )


def _list(summary: Mapping[str, Any], key: str) -> list[Any]:
    value = summary.get(key)
    return value if isinstance(value, list) else []


def _as_given(value: Any) -> float | None:
    """A number as recorded (96 stays 96 where it is shown), or None."""
    return value if is_number(value) else None
