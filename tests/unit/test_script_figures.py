"""A script run's figures read typed: a value of the wrong type (a store edited by hand) is
not recorded, so the notes made of it never fail."""

from __future__ import annotations

from trainscale.reporting.script_notes import (
    data_wait_text,
    disagreement_text,
    frameworks_text,
    is_input_bound,
)
from trainscale.results.script_figures import ScriptFigures

RECORDED = {
    "data_wait_share": 0.25,
    "data_wait_s_median": 0.004,
    "samples_disagree": True,
    "samples_disagree_steps": 4,
    "samples_per_worker_median": [64, 32],
    "global_batch_measured": 96,
    "steps_disagree": True,
    "steps_per_worker": [5, 4],
    "frameworks": {"pytorch": "2.5.1", "jax": None},
}


def test_recorded_figures_are_read_as_recorded() -> None:
    figures = ScriptFigures.of(RECORDED)
    assert figures.samples_per_worker_median == (64, 32)
    assert figures.global_batch_measured == 96 and figures.steps_per_worker == (5, 4)
    assert frameworks_text(RECORDED) == "pytorch 2.5.1, jax"
    assert is_input_bound(RECORDED)
    assert data_wait_text(RECORDED).startswith("25.0% of the step time (median 4.0 ms a step)")
    text = disagreement_text(RECORDED)
    assert text is not None and "(median per rank: 64, 32)" in text and "96 samples" in text


def test_values_of_the_wrong_type_are_not_recorded() -> None:
    edited = {
        "data_wait_share": "a lot",
        "data_wait_s_median": "x",
        "samples_disagree": "yes",
        "steps_disagree": True,
        "steps_per_worker": "5,4",
        "frameworks": ["pytorch"],
    }
    assert ScriptFigures.of(edited) == ScriptFigures()
    assert not is_input_bound(edited) and data_wait_text(edited) is None
    assert disagreement_text(edited) is None and frameworks_text(edited) is None
    # A share with an unreadable wait still words the share.
    assert data_wait_text({"data_wait_share": 0.05, "data_wait_s_median": "x"}) == (
        "5.0% of the step time (median 0.0 ms a step)"
    )
