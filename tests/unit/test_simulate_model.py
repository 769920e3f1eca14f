"""Simulator invariants: one worker predicts the calibrated serial time, more bandwidth never
predicts slower, the perfect-overlap bound holds, overlap and stragglers behave."""

from __future__ import annotations

import numpy as np
import pytest

from trainscale.simulator.model import StepCosts, simulate_step
from trainscale.simulator.predict import predict_one, predict_scaling, step_costs

from tests.helpers.simulate import calibration, cluster, tiny_layout


def perfect_overlap_bound_s(costs: StepCosts) -> float:
    """The fastest a step can be at factor 1: communication fully hidden where it can be.

    No bucket's all-reduce starts before forward ends, and compute cannot be hidden, so the
    step is at least max(compute, data + forward + all communication) + optimizer.
    """
    return max(costs.compute_s, costs.data_s + costs.forward_s + costs.comm_s) + costs.optimizer_s


def test_one_worker_predicts_the_calibrated_serial_step():
    cal = calibration(per_sample=1e-3, fixed=0.004, optimizer=0.01, data_per_sample=1e-5)
    expected = 0.004 + 64e-3 + 0.01 + 64e-5
    exact = predict_one(cal, tiny_layout(), cluster(), 1, 64)
    assert exact.step_time_s == pytest.approx(expected)
    assert exact.comm_s == 0.0 and exact.exposed_comm_s == 0.0
    # with a spread, the median worker still is the calibrated one
    noisy = calibration(per_sample=1e-3, fixed=0.004, optimizer=0.01, sigma=0.1)
    one = predict_one(noisy, tiny_layout(), cluster(), 1, 64, samples=4001)
    assert one.step_time_s == pytest.approx(0.004 + 64e-3 + 0.01, rel=2e-3)


@pytest.mark.parametrize("overlap", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("algorithm", ["ring", "tree", "halving-doubling", "parameter-server"])
def test_more_bandwidth_never_predicts_slower(overlap, algorithm):
    cal = calibration(sigma=0.05)
    previous = None
    for bandwidth in (1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12):
        machine = cluster(bandwidth=bandwidth, overlap=overlap, algorithm=algorithm)
        step = predict_one(cal, tiny_layout(), machine, 4, 64, seed=7).step_time_s
        if previous is not None:
            assert step <= previous + 1e-12
        previous = step


def test_step_respects_the_perfect_overlap_bound():
    for bandwidth in (1e7, 1e8, 1e9, 1e10):
        machine = cluster(bandwidth=bandwidth)
        costs = step_costs(calibration(), tiny_layout(), machine, 4, 64)
        step = float(simulate_step(costs, np.ones(1)).step_s[0])
        bound = perfect_overlap_bound_s(costs)
        assert step >= bound - 1e-12
        # and never worse than no overlap at all
        assert step <= costs.compute_s + costs.comm_s + costs.optimizer_s + 1e-12


def test_free_communication_leaves_only_compute():
    machine = cluster(bandwidth=1e18, alpha=0.0)
    costs = step_costs(calibration(), tiny_layout(), machine, 8, 64)
    step = float(simulate_step(costs, np.ones(1)).step_s[0])
    assert step == pytest.approx(costs.compute_s + costs.optimizer_s)
    assert step == pytest.approx(perfect_overlap_bound_s(costs))


def test_timeline_by_hand():
    # forward 1, backward 2 (buckets ready at 1/4 and all of it), comm 0.5 and 1.0
    costs = StepCosts(
        data_s=0.0,
        forward_s=1.0,
        backward_s=2.0,
        optimizer_s=0.25,
        bucket_ready_shares=(0.25, 1.0),
        bucket_comm_s=(0.5, 1.0),
        overlap=1.0,
    )
    out = simulate_step(costs, np.array([1.0, 2.0]))
    # f=1: bucket 0 ready 1.5, done 2.0; bucket 1 ready 3.0, done 4.0; step 4.25
    # f=2: everything twice as slow, comm not: b0 3 -> 3.5, b1 6 -> 7; optimizer 0.5
    assert out.step_s.tolist() == pytest.approx([4.25, 7.5])
    assert out.exposed_comm_s.tolist() == pytest.approx([1.0, 1.0])
    serial = StepCosts(**{**costs.__dict__, "overlap": 0.0})
    assert simulate_step(serial, np.ones(1)).step_s[0] == pytest.approx(3.0 + 1.5 + 0.25)


def test_a_busy_channel_delays_the_next_bucket():
    costs = StepCosts(
        data_s=0.0,
        forward_s=0.0,
        backward_s=1.0,
        optimizer_s=0.0,
        bucket_ready_shares=(0.1, 0.2),
        bucket_comm_s=(2.0, 1.0),
    )
    # bucket 1 is ready at 0.2 but waits for bucket 0 (done at 2.1): ends at 3.1
    assert simulate_step(costs, np.ones(1)).step_s[0] == pytest.approx(3.1)


def test_stragglers_slow_many_workers_more():
    cal = calibration(sigma=0.1)
    fast = cluster(bandwidth=1e18, alpha=0.0, devices=256)
    rows = predict_scaling(cal, tiny_layout(), fast, [1, 16, 256])
    steps = [r.step_time_s for r in rows]
    assert steps[0] < steps[1] < steps[2]
    assert rows[0].straggler_s == pytest.approx(0.0, abs=1e-3)
    assert rows[2].straggler_s > rows[1].straggler_s > 0


def test_weak_and_strong_scaling():
    cal = calibration(per_sample=1e-3, optimizer=0.0)
    machine = cluster(bandwidth=1e18, alpha=0.0)
    weak = predict_scaling(cal, tiny_layout(), machine, [1, 4], per_worker_batch=32)
    assert [r.global_batch for r in weak] == [32, 128]
    assert weak[1].speedup == pytest.approx(4.0)
    strong = predict_scaling(cal, tiny_layout(), machine, [1, 4], global_batch=128)
    assert [r.per_worker_batch for r in strong] == [128, 32]
    assert strong[1].step_time_s == pytest.approx(strong[0].step_time_s / 4)


def test_exposed_share_grows_as_bandwidth_falls():
    cal = calibration()
    shares = [
        predict_one(cal, tiny_layout(), cluster(bandwidth=b), 4, 64).exposed_comm_share
        for b in (1e11, 1e9, 1e8)
    ]
    assert shares[0] <= shares[1] <= shares[2]
    assert shares[0] >= 0.0 and shares[2] < 1.0


def test_nodes_beyond_the_cluster_are_refused():
    from trainscale.simulator.cluster import ClusterError

    with pytest.raises(ClusterError, match="do not fit"):
        predict_one(calibration(), tiny_layout(), cluster(devices=4), 8, 64)
    with pytest.raises(ClusterError, match="whole numbers"):
        predict_one(calibration(), tiny_layout(), cluster(devices=4), 0, 64)


def test_multi_node_prediction_uses_the_network():
    cal = calibration()
    two_nodes = cluster(devices=4, nodes=None, bandwidth=1e11, inter_bandwidth=1e9)
    inside = predict_one(cal, tiny_layout(), two_nodes, 4, 64)
    across = predict_one(cal, tiny_layout(), two_nodes, 8, 64)
    assert across.nodes == 2 and inside.nodes == 1
    assert across.comm_s > inside.comm_s


def test_time_per_step_of_each_emulated_mode():
    from trainscale.simulator.collectives import ring_allreduce_s
    from trainscale.simulator.time_to_accuracy import EmulatedSetting, step_time_s

    cal = calibration(per_sample=1e-3, optimizer=0.004, sigma=0.0)
    layout = tiny_layout()
    machine = cluster(bandwidth=1e9, alpha=0.0, devices=8)

    def setting(mode, workers, local_steps=None):
        return EmulatedSetting("r", mode, workers, 64 * workers, 64, 100, 6400, 0.9, local_steps)

    sync = step_time_s(setting("sync", 4), cal, layout, machine)
    assert sync == pytest.approx(predict_one(cal, layout, machine, 4, 64).step_time_s_mean)
    # local SGD: 8 local steps of compute + optimizer, then one average of the whole model
    local = step_time_s(setting("local-sgd", 4, local_steps=8), cal, layout, machine)
    average = ring_allreduce_s(layout.total_bytes, 4, machine.topology().intra)
    assert local == pytest.approx(0.064 + 0.004 + average / 8)
    # async: 4 workers each compute and exchange the model with the server, which applies
    # one update at a time
    beta = 1e-9
    exchange = 2 * layout.total_bytes * beta  # push and pull, one worker
    per_update = 2 * layout.total_bytes * beta + 0.004
    got = step_time_s(setting("async", 4), cal, layout, machine)
    assert got == pytest.approx(max((0.064 + exchange) / 4, per_update))


def test_plots_of_an_uncalibrated_prediction_say_so():
    from dataclasses import replace

    from trainscale.simulator.plots import (
        UNCALIBRATED,
        calibration_note,
        scaling_plots,
        time_to_accuracy_plot,
    )

    measured = calibration()
    from_peak = replace(measured, source="peak", run_ids=())
    rows = predict_scaling(measured, tiny_layout(), cluster(), [1, 2, 4])
    assert calibration_note(measured) is None
    assert "peak FLOP/s" in calibration_note(from_peak)
    calibrated = scaling_plots(rows, "mnist-cnn", "c", measured)
    assert not any(UNCALIBRATED in plot.title for plot in calibrated)
    uncalibrated = scaling_plots(rows, "mnist-cnn", "c", from_peak)
    assert [p.title.endswith(f"({UNCALIBRATED})") for p in uncalibrated] == [True] * 3
    # The note is drawn on the figure too: the PNGs differ from the calibrated ones.
    assert all(a.png != b.png for a, b in zip(calibrated, uncalibrated, strict=True))
    assert time_to_accuracy_plot([], "mnist-cnn", "c", from_peak) == []
