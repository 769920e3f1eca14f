"""A data-parallel run's stored breakdown is one rank's, whole: the parts add up to a step."""

from __future__ import annotations

import pytest

from trainscale.train.breakdown import PHASES, breakdown_fields


def test_the_slowest_ranks_phases_are_stored_together_not_each_phases_largest() -> None:
    # Rank 1 computes longer; rank 0 waits for it in the all-reduce (longer exposed comm).
    fast = {"data": 0.001, "forward": 0.010, "backward": 0.030, "optimizer": 0.002,
            "exposed_comm": 0.012}  # fmt: skip
    slow = {"data": 0.001, "forward": 0.014, "backward": 0.031, "optimizer": 0.002,
            "exposed_comm": 0.001}  # fmt: skip
    fields = breakdown_fields([fast, slow], num_sampled_steps=4, comm_marked=True)
    assert fields["breakdown_s"] == slow
    assert fields["breakdown_sampled_steps"] == 4
    step_s = sum(slow[phase] for phase in PHASES)
    assert sum(fields["breakdown_s"][phase] for phase in PHASES) == pytest.approx(step_s)


def test_ranks_without_a_breakdown_and_an_unmarked_communication() -> None:
    medians = {"data": 0.001, "forward": 0.01, "backward": 0.02, "optimizer": 0.002,
               "exposed_comm": 0.003}  # fmt: skip
    fields = breakdown_fields([{}, medians], num_sampled_steps=2, comm_marked=False)
    assert fields["breakdown_s"] == {**medians, "exposed_comm": None}
    assert breakdown_fields([{}, {}], 0, comm_marked=False)["breakdown_s"] is None
