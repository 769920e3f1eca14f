"""The line a script run adds to its result: the data wait, and the diagnosis of a script
whose model waits for its data."""

from __future__ import annotations

import pytest

from trainscale.cli.script_run import INPUT_BOUND_SHARE, data_wait_line


def test_a_built_in_run_has_no_data_wait_line() -> None:
    assert data_wait_line({"samples_per_s": 10.0}) is None


@pytest.mark.parametrize("share", [0.0, 0.04, INPUT_BOUND_SHARE])
def test_a_small_wait_is_reported_without_advice(share: float) -> None:
    line = data_wait_line({"data_wait_share": share, "data_wait_s_median": 0.0031})
    assert line == f"  data wait: {share:.1%} of the step time (median 3.1 ms a step)"


def test_a_wait_over_a_tenth_of_the_step_says_the_script_is_input_bound() -> None:
    line = data_wait_line({"data_wait_share": 0.35, "data_wait_s_median": 0.02})
    assert line is not None
    assert line.startswith("  data wait: 35.0% of the step time (median 20.0 ms a step)")
    assert "input-bound" in line and "num_workers" in line
