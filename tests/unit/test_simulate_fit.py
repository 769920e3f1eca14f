"""Fitting the simulator to published points: it recovers the parameters that generated a
synthetic table, and predicts that table's held-out points."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from trainscale.errors import ConfigError
from trainscale.simulator.cluster import load_preset
from trainscale.simulator.fit import Parameters, fit_table, placed, scaled_links, system_model

MODEL = "cifar10-resnet44"


@dataclass(frozen=True)
class Point:
    devices: int
    nodes: int
    batch_per_device: int
    images_per_s: float | None = None
    efficiency: float | None = None


@dataclass(frozen=True)
class Table:
    name: str
    model: str
    precision: str
    fit: tuple[int, ...]
    points: tuple[Point, ...]
    fit_from: str | None = None


@pytest.fixture(scope="module")
def slow_network():
    """A K80 cluster whose links are slow and whose communication does not overlap, so that
    bandwidth shows in the step time (the fit can then identify it)."""
    cluster = load_preset("k80-pcie-ib")
    return replace(
        cluster,
        overlap=0.0,
        intra_node=replace(cluster.intra_node, bandwidth_bytes_per_s=2e8),
        inter_node=replace(cluster.inter_node, bandwidth_bytes_per_s=1e8),
        nodes=None,
    )


def synthetic_table(system, truth: Parameters, layout: list[tuple[int, int, int]], fit):
    points = tuple(
        Point(d, n, b, images_per_s=system.throughput(truth, d, n, b)) for d, n, b in layout
    )
    return Table("synthetic", MODEL, "fp32", fit, points)


def test_the_fit_recovers_the_parameters_that_made_the_table(slow_network):
    system = system_model(MODEL, slow_network, "fp32", reference_batch=64, samples=200)
    truth = Parameters(efficiency=0.23, overhead_s=0.004, straggler_sigma=0.06, bandwidth_scale=0.6)
    layout = [(1, 1, 32), (1, 1, 128), (4, 1, 64), (8, 2, 64), (16, 4, 64), (32, 8, 64)]
    # Devices 1 appears twice (two batches: efficiency and overhead apart), 4 devices in one
    # node show the spread, 8 over 2 nodes the links; 16 and 32 devices are held out.
    table = synthetic_table(system, truth, layout, fit=(1, 4, 8))
    fitted = fit_table(table, slow_network, samples=200)
    assert fitted.fitted.efficiency == pytest.approx(truth.efficiency, rel=0.05)
    assert fitted.fitted.overhead_s == pytest.approx(truth.overhead_s, rel=0.1)
    assert fitted.fitted.straggler_sigma == pytest.approx(truth.straggler_sigma, rel=0.1)
    assert fitted.fitted.bandwidth_scale == pytest.approx(truth.bandwidth_scale, rel=0.05)
    held_out = fitted.held_out
    assert [p.devices for p in held_out] == [16, 32]
    assert all(abs(p.error) < 0.02 for p in held_out)
    assert fitted.median_abs_error() < 0.02


def test_a_parameter_no_point_shows_keeps_the_cluster_files_value(slow_network):
    system = system_model(MODEL, slow_network, "fp32", reference_batch=64, samples=200)
    truth = Parameters(efficiency=0.3, overhead_s=0.002, straggler_sigma=0.05, bandwidth_scale=0.5)
    table = synthetic_table(system, truth, [(1, 1, 32), (1, 1, 128), (8, 2, 64)], fit=(1,))
    fitted = fit_table(table, slow_network, samples=200)
    assert fitted.fitted.efficiency == pytest.approx(0.3, rel=0.05)
    # One device says nothing of the spread or the network: the cluster file's stay.
    assert fitted.fitted.straggler_sigma == fitted.prior.straggler_sigma
    assert fitted.fitted.bandwidth_scale == 1.0
    assert fitted.notes == (
        "kept from the cluster file (no fit point shows them): straggler_sigma, bandwidth_scale",
    )


def test_efficiency_points_are_compared_as_efficiency(slow_network):
    system = system_model(MODEL, slow_network, "fp32", reference_batch=64, samples=200)
    truth = Parameters(efficiency=0.3, overhead_s=0.002, straggler_sigma=0.02, bandwidth_scale=0.4)
    one = system.throughput(truth, 1, 1, 64)
    eight = system.throughput(truth, 8, 2, 64)
    table = Table(
        "eff",
        MODEL,
        "fp32",
        (1,),
        (Point(1, 1, 64, images_per_s=one), Point(8, 2, 64, efficiency=eight / (8 * one))),
    )
    fitted = fit_table(table, slow_network, samples=200)
    (point,) = fitted.held_out
    assert point.measure == "efficiency" and point.published == pytest.approx(eight / (8 * one))
    assert 0 < point.predicted <= 1


def test_links_scale_and_points_are_placed_as_published(slow_network):
    scaled = scaled_links(slow_network, 0.5)
    assert scaled.intra_node.bandwidth_bytes_per_s == pytest.approx(1e8)
    assert scaled.inter_node.bandwidth_bytes_per_s == pytest.approx(5e7)
    assert placed(slow_network, 8, 8).devices_per_node == 1
    assert placed(slow_network, 8, 1).devices_per_node == 8
    with pytest.raises(ConfigError, match="6 devices do not split evenly over 4 nodes"):
        placed(slow_network, 6, 4)


def test_fit_devices_must_be_points_of_the_table(slow_network):
    table = Table("t", MODEL, "fp32", (1,), (Point(1, 1, 64, images_per_s=100.0),))
    with pytest.raises(ConfigError, match="table t has no point at 8 devices; its points: 1"):
        fit_table(table, slow_network, fit_devices=[8])


def test_a_table_of_efficiencies_is_fitted_on_its_source_throughput_table():
    from trainscale.simulator.published import load_table

    efficiency = load_table("horovod-readme-pascal-25gbe-vgg16-efficiency")
    throughput = load_table(efficiency.fit_from)
    cluster = load_preset(efficiency.system)
    fitted = fit_table(efficiency, cluster, samples=200)
    source = fit_table(throughput, cluster, samples=200)
    assert fitted.fitted == source.fitted
    assert fitted.notes[0] == f"fitted on the points [1] of table {throughput.name}"
    assert [p.role for p in fitted.points] == ["held out", "held out"]
    assert all(p.measure == "efficiency" and 0 < p.predicted < 1 for p in fitted.points)
