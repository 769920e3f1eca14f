"""TensorFlow data parallelism trains exactly like one replica at the same global batch:
two MultiWorkerMirroredStrategy worker processes, and two MirroredStrategy replicas in one
process, each against one worker.

Tolerance: the replicas' gradients are summed by a ring all-reduce (or across logical
devices) in another order than one replica sums its batch's, so the weights agree up to
float32 rounding carried through 8 SGD steps: rtol 1e-4, atol 1e-5, as PyTorch's DDP test.
The runs use SGD (the recipe's Adam divides by the root of tiny second moments in its first
steps, which turns rounding noise on near-zero gradients into differences of up to lr) and
no dropout (masks depend on how samples are spread over replicas).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from trainscale.parallel.launcher import launch_workers  # noqa: E402

from tests.distributed.tf_equivalence_worker import (  # noqa: E402
    sum_rank_vectors,
    train_and_return_weights,
)
from tests.helpers.tf_tiny import tf_config  # noqa: E402

STEPS = 8  # 96 samples / global batch 16: one epoch of 6 steps, then the reshuffled next


def _config(**changes: object) -> dict:
    return tf_config(global_batch_size=16, steps=STEPS, optimizer="sgd", lr=0.05, **changes).flat()


def _assert_same_weights(got: list, expected: list, who: str) -> None:
    assert len(got) == len(expected)
    for index, (a, b) in enumerate(zip(got, expected, strict=True)):
        np.testing.assert_allclose(
            a, b, rtol=1e-4, atol=1e-5, err_msg=f"{who}: weight {index} differs from 1 worker"
        )


def test_two_workers_and_two_replicas_match_one_worker_at_the_same_global_batch():
    serial = launch_workers(train_and_return_weights, (_config(workers=1),), 1)[0]
    mwms = launch_workers(train_and_return_weights, (_config(workers=2),), 2)
    mirrored = launch_workers(
        train_and_return_weights, (_config(workers=2, single_process=True),), 1
    )[0]

    # Training moved the weights: equal weights after it are no accident of doing nothing.
    moved = zip(serial["initial"], serial["weights"], strict=True)
    assert any(not np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in moved)

    assert set(mwms) == {0, 1}
    for rank in (0, 1):
        _assert_same_weights(mwms[rank]["weights"], serial["weights"], f"MWMS rank {rank}")
        facts = mwms[rank]["workers"][rank]
        assert facts["tf_strategy"] == "MultiWorkerMirroredStrategy(ring, 2 workers)"
        assert facts["tf_intra_op_threads"] == 1
    _assert_same_weights(mirrored["weights"], serial["weights"], "MirroredStrategy x2")
    (facts,) = mirrored["workers"]
    assert facts["tf_strategy"].startswith("MirroredStrategy(2 replicas")
    assert facts["tf_intra_op_threads"] == 2  # both replicas' threads in the one process

    # The same evaluation: the replicas' shares of the test set add up to the whole.
    for run in (mwms[0], mwms[1], mirrored):
        assert run["summary"]["test_accuracy"] == pytest.approx(serial["summary"]["test_accuracy"])
        assert run["summary"]["num_samples"] == STEPS * 16  # global samples
    # Slowest-rank rule: the step times are gathered, the same on both ranks.
    assert mwms[0]["step_times"] == mwms[1]["step_times"]
    assert len(mwms[0]["step_times"]) == STEPS


def test_two_workers_sum_a_phases_statistics_through_tf_distribute():
    """mnist-dbn's CD pre-training sums each step's statistics over the workers this way."""
    results = launch_workers(sum_rank_vectors, (_config(workers=2),), 2)

    assert results == {0: [[3.0, 30.0], [3.0, 30.0]], 1: [[3.0, 30.0], [3.0, 30.0]]}
