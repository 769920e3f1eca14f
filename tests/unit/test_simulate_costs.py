"""Pure cost-model functions against hand-computed values: units, collectives, buckets,
stragglers, and the Amdahl limit the step model reduces to."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from trainscale.data.tensors import DataRequest
from trainscale.metrics.scaling import amdahl_speedup
from trainscale.simulator.buckets import (
    DEFAULT_FIRST_BUCKET_BYTES,
    MIB,
    ParamInfo,
    assign_buckets,
    bucket_caps,
    layout_from_params,
    workload_layout,
)
from trainscale.simulator.calibrate import training_flops_per_sample
from trainscale.simulator.collectives import (
    Link,
    Topology,
    allreduce_s,
    halving_doubling_allreduce_s,
    hierarchical_allreduce_s,
    link_from_allreduce_fit,
    parameter_server_s,
    ring_allreduce_s,
    tree_allreduce_s,
)
from trainscale.simulator.predict import predict_scaling
from trainscale.simulator.stragglers import (
    max_normal_samples,
    sigma_from_spread,
    slowest_factor_samples,
)
from trainscale.simulator.units import parse_bandwidth, parse_flops, parse_time
from trainscale.train.flops import count_flops
from trainscale.workloads import get_workload

from tests.helpers.simulate import calibration, cluster, tiny_layout

LINK = Link(alpha_s=1e-5, beta_s_per_byte=1e-9)


# -- units ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [
        ("100 Gb/s", 12.5e9),
        ("100Gbps", 12.5e9),
        ("25 GbE", 3.125e9),
        ("12 GB/s", 12e9),
        ("12.5 GiB/s", 12.5 * 2**30),
        ("900 MB/s", 900e6),
        ("1.5 TB/s", 1.5e12),
    ],
)
def test_bandwidths_parse_bits_and_bytes(text, bytes_per_s):
    assert parse_bandwidth(text) == pytest.approx(bytes_per_s)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5 us", 5e-6), ("5 µs", 5e-6), ("300 ns", 3e-7), ("1.5 ms", 1.5e-3), ("0 s", 0.0)],
)
def test_times_parse(text, seconds):
    assert parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "flops"), [("15.7 TFLOP/s", 15.7e12), ("312 TFLOPS", 312e12), ("900 GFLOP/s", 9e11)]
)
def test_flop_rates_parse(text, flops):
    assert parse_flops(text) == pytest.approx(flops)


@pytest.mark.parametrize("bad", ["100", 100, "100 Gb", "fast", "-5 GB/s", "0 GB/s", "25 GBE", True])
def test_bandwidths_without_a_valid_unit_are_refused(bad):
    with pytest.raises(ValueError):
        parse_bandwidth(bad)


@pytest.mark.parametrize("bad", ["5", "5 sec", "-1 us", "5 hours", 5e-6])
def test_times_without_a_valid_unit_are_refused(bad):
    with pytest.raises(ValueError):
        parse_time(bad)


# -- collectives ------------------------------------------------------------------------------


def test_ring_allreduce_by_hand():
    # 2 (p - 1) (alpha + n / p beta) = 6 (1e-5 + 2.5e-4)
    assert ring_allreduce_s(1e6, 4, LINK) == pytest.approx(1.56e-3)
    assert ring_allreduce_s(1e6, 2, LINK) == pytest.approx(2 * 1e-5 + 1e6 * 1e-9)
    assert ring_allreduce_s(1e6, 1, LINK) == 0.0
    assert ring_allreduce_s(0, 8, LINK) == 0.0


def test_tree_and_halving_doubling_by_hand():
    # log2 4 = 2 rounds of the whole vector
    assert tree_allreduce_s(1e6, 4, LINK) == pytest.approx(2 * (1e-5 + 1e-3))
    # 2 log2 p alpha + 2 (p - 1) / p n beta
    assert halving_doubling_allreduce_s(1e6, 4, LINK) == pytest.approx(4e-5 + 1.5e-3)
    # a non-power of two takes ceil(log2 p) rounds
    assert tree_allreduce_s(1e6, 5, LINK) == pytest.approx(3 * (1e-5 + 1e-3))


def test_ring_bandwidth_term_approaches_twice_the_message():
    # for large p the ring moves ~2n per rank, independent of p: it scales
    big = Link(0.0, 1e-9)
    assert ring_allreduce_s(1e6, 1024, big) == pytest.approx(2e-3, rel=1e-3)


def test_hierarchical_by_hand():
    intra = Link(1e-6, 1e-11)
    inter = Link(1e-5, 1e-9)
    # reduce-scatter and all-gather inside (4 ranks): 2 x 3 (1e-6 + 2e6 x 1e-11)
    # ring across 2 nodes of the whole 8 MB: 2 (1e-5 + 4e6 x 1e-9)
    expected = 2 * 3 * (1e-6 + 2e-5) + 2 * (1e-5 + 4e-3)
    assert hierarchical_allreduce_s(8e6, 2, 4, intra, inter) == pytest.approx(expected)
    topology = Topology(devices_per_node=4, intra=intra, inter=inter)
    assert allreduce_s(8e6, 8, topology, "hierarchical") == pytest.approx(expected)


def test_parameter_server_by_hand():
    # the server link carries p n / servers each way: 4e6 bytes x 1e-9
    assert parameter_server_s(1e6, 4, LINK, LINK) == pytest.approx(2 * (1e-5 + 4e-3))
    # two servers halve it, down to a worker's own link (1e-3)
    assert parameter_server_s(1e6, 4, LINK, LINK, servers=2) == pytest.approx(2 * (1e-5 + 2e-3))
    assert parameter_server_s(1e6, 4, LINK, LINK, servers=8) == pytest.approx(2 * (1e-5 + 1e-3))


def test_flat_ring_across_nodes_runs_at_the_slowest_hop():
    intra, inter = Link(1e-6, 1e-11), Link(1e-5, 1e-9)
    topology = Topology(devices_per_node=4, intra=intra, inter=inter)
    assert allreduce_s(8e6, 8, topology, "ring") == pytest.approx(ring_allreduce_s(8e6, 8, inter))
    assert allreduce_s(8e6, 4, topology, "ring") == pytest.approx(ring_allreduce_s(8e6, 4, intra))


def test_tree_rounds_across_nodes_share_the_network_link():
    intra, inter = Link(0.0, 1e-11), Link(0.0, 1e-9)
    topology = Topology(devices_per_node=2, intra=intra, inter=inter)
    # 4 ranks on 2 nodes: round 1 inside the node, round 2 across, two ranks per link
    expected = 1e6 * 1e-11 + 1e6 * 2e-9
    assert allreduce_s(1e6, 4, topology, "tree") == pytest.approx(expected)


def test_auto_is_the_fastest_candidate():
    topology = Topology(devices_per_node=4, intra=Link(1e-6, 1e-11), inter=Link(1e-5, 1e-9))
    for n in (1e3, 1e6, 1e8):
        candidates = [allreduce_s(n, 16, topology, a) for a in ("ring", "tree", "hierarchical")]
        assert allreduce_s(n, 16, topology, "auto") <= min(candidates) + 1e-15


def test_more_nodes_than_links_is_refused():
    with pytest.raises(ValueError, match="inter-node"):
        allreduce_s(1e6, 8, Topology(devices_per_node=4, intra=LINK), "ring")


def test_link_from_a_probe_fit_inverts_the_ring_cost():
    link = link_from_allreduce_fit(1e-4, 2e-9, 2)
    assert link.alpha_s == pytest.approx(5e-5)
    assert link.beta_s_per_byte == pytest.approx(2e-9)
    # and the ring cost of that link gives the fit back, at any size
    for n in (1e3, 1e7):
        assert ring_allreduce_s(n, 4, link_from_allreduce_fit(1e-4, 2e-9, 4)) == pytest.approx(
            1e-4 + 2e-9 * n
        )


def test_negative_links_are_refused():
    with pytest.raises(ValueError):
        Link(-1e-6, 1e-9)
    with pytest.raises(ValueError):
        Link.from_bandwidth(1e-6, 0.0)


# -- buckets ----------------------------------------------------------------------------------


def test_buckets_close_once_they_reach_their_cap():
    # first bucket 10 bytes, then 25: a bucket may exceed its cap by its last tensor
    assert assign_buckets([4, 4, 4, 30, 5, 5], 10, 25) == [[0, 1, 2], [3], [4, 5]]
    assert assign_buckets([], 10, 25) == []


def test_bucket_caps_follow_torch():
    assert bucket_caps(None) == (DEFAULT_FIRST_BUCKET_BYTES, 25 * MIB)
    assert bucket_caps(5) == (5 * MIB, 5 * MIB)
    with pytest.raises(ValueError):
        bucket_caps(0)


def test_layout_runs_in_reverse_registration_order():
    params = [
        ParamInfo("first.weight", 3 * MIB // 4, 3 * MIB, weight=6.0),
        ParamInfo("middle.weight", MIB // 8, MIB // 2, weight=3.0),
        ParamInfo("last.weight", MIB // 2, 2 * MIB, weight=1.0),
    ]
    layout = layout_from_params(params)
    # backward: last (2 MiB >= 1 MiB closes bucket 0), then middle + first in bucket 1
    assert [b.num_bytes for b in layout.buckets] == [2 * MIB, MIB // 2 + 3 * MIB]
    assert [b.ready_share for b in layout.buckets] == pytest.approx([0.1, 1.0])
    assert layout.total_bytes == 5 * MIB + MIB // 2


@pytest.mark.parametrize("workload", ["mnist-cnn", "tweets-text", "imdb-bilstm"])
def test_a_layout_counts_the_flops_a_run_counts(workload):
    # The layout's pass counts FLOPs beside the operators, so the simulator need not build
    # and run the model a second time for them; the count must be the run's own (the
    # recurrent one's through trainscale's formulas for the fused LSTM kernel).
    spec = get_workload(workload)
    data = spec.make_synthetic(DataRequest(max_train=2, max_test=2))
    torch.manual_seed(0)
    counted = count_flops(spec.build_model(data.meta), data.train_x[:2], data.train_y[:2], spec)
    run_count = counted.per_sample if counted else None
    layout = workload_layout(workload)
    assert run_count and layout.flops_per_sample == run_count
    assert counted and layout.flops_by_kind == counted.by_kind  # the kinds a run counts too
    assert training_flops_per_sample(workload, counted=layout.flops_per_sample) == run_count


# -- stragglers -------------------------------------------------------------------------------


def test_sigma_from_median_and_iqr_inverts_the_lognormal_quartiles():
    sigma = 0.3
    z = 0.6744897501960817
    iqr = math.exp(sigma * z) - math.exp(-sigma * z)
    assert sigma_from_spread(1.0, iqr) == pytest.approx(sigma)
    assert sigma_from_spread(2.0, 2 * iqr) == pytest.approx(sigma)
    assert sigma_from_spread(1.0, 0.0) == 0.0


def test_max_of_normals_has_the_right_median():
    # P(max of p <= m) = Phi(m)^p = 1/2  ->  m = Phi^-1(2^(-1/p))
    from statistics import NormalDist

    for p in (1, 2, 16, 1000):
        draws = max_normal_samples(p, 20001, seed=1)
        expected = NormalDist().inv_cdf(0.5 ** (1 / p))
        assert np.median(draws) == pytest.approx(expected, abs=0.03)


def test_straggler_factors_are_seeded_and_grow_with_workers():
    a = slowest_factor_samples(8, 0.1, 500, seed=3)
    assert np.array_equal(a, slowest_factor_samples(8, 0.1, 500, seed=3))
    assert np.median(slowest_factor_samples(1, 0.1, 2001)) == pytest.approx(1.0, abs=0.01)
    assert np.median(slowest_factor_samples(64, 0.1, 2001)) > np.median(a) > 1.0
    assert np.all(slowest_factor_samples(64, 0.0, 10) == 1.0)


# -- Amdahl ------------------------------------------------------------------------------------


def test_fixed_serial_work_gives_amdahls_speedup():
    """With free communication and no stragglers, strong scaling of a step whose optimizer
    does not shrink with the batch is Amdahl's law with s = optimizer / serial step."""
    cal = calibration(per_sample=1e-3, optimizer=0.016, sigma=0.0)
    free = cluster(bandwidth=1e18, alpha=0.0, devices=64)
    rows = predict_scaling(cal, tiny_layout(), free, [1, 2, 4, 8, 64], global_batch=64)
    serial = cal.compute_s(64) + cal.optimizer_s + cal.data_s_per_sample * 64
    s = cal.optimizer_s / serial
    for row in rows:
        assert row.speedup == pytest.approx(amdahl_speedup(s, row.workers))
    # and the limit: never above 1 / s
    assert all(row.speedup < 1 / s for row in rows)


def test_the_layout_of_a_registered_workload():
    """mnist-cnn: the classifier's 4.7 MB of gradients close the first bucket (it passes
    1 MiB), early in backward by FLOPs; the convolutions follow in a second bucket."""
    from trainscale.simulator.buckets import workload_layout

    layout = workload_layout("mnist-cnn")
    assert layout.weights_from == "flops"
    assert [b.num_tensors for b in layout.buckets] == [4, 4]
    assert layout.total_bytes == 4 * 1_199_882
    assert layout.buckets[0].num_bytes > DEFAULT_FIRST_BUCKET_BYTES
    # the classifier does ~10% of the FLOPs: its bucket is ready early in backward
    assert 0.0 < layout.buckets[0].ready_share < 0.2
    assert layout.buckets[-1].ready_share == 1.0
    assert layout.ops_per_step and 10 < layout.ops_per_step < 200
    capped = workload_layout("mnist-cnn", bucket_cap_mb=1.0)
    assert len(capped.buckets) >= len(layout.buckets)
