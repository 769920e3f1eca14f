"""`simulate --cluster local` without a run of the workload: the device's peak and fixed cost
per operator come from the host's newest non-quick probes."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.results.store import RunStore
from trainscale.simulator.calibrate import CalibrationError
from trainscale.simulator.cluster import DeviceSpec
from trainscale.simulator.probed_device import (
    PROBED_EFFICIENCY,
    newest_probe,
    probed_peaks,
    with_probed_costs,
)
from trainscale.simulator.setup import calibrate, resolve_cluster

from tests.helpers.simulate import MACHINE

MATMUL = {"precisions": {"fp32": {"best_flops_per_s": 8e10}, "bf16": {"best_flops_per_s": 2e11}}}


def _store(tmp_path: Path, *probes: tuple[str, dict]) -> RunStore:
    store = RunStore(tmp_path / "s.db")
    for kind, result in probes:
        store.add_probe(kind, result, MACHINE, host="sim-host", device_type="cpu", device="c")
    return store


def test_a_cpu_workers_peak_is_its_share_of_the_probes_threads() -> None:
    result = {**MATMUL, "threads": 2}
    assert probed_peaks(result, cores=1) == {"fp32": 4e10, "bf16": 1e11}
    assert probed_peaks(result, cores=None) == {"fp32": 8e10, "bf16": 2e11}  # a GPU: as is


def test_quick_and_busy_probes_are_not_figures(tmp_path: Path) -> None:
    quick = {"seconds_per_op": 1e-5, "quick": True}
    busy = {"seconds_per_op": 1e-5, "quick": False, "contention": {"verdict": "busy"}}
    with _store(tmp_path, ("dispatch", quick), ("dispatch", busy)) as store:
        assert newest_probe(store, "dispatch", "sim-host", "cpu") is None
        device = DeviceSpec(kind="cpu", name="c", cores=1, source="CPU cores of sim-host")
        assert with_probed_costs(device, store, "sim-host") == device
    assert newest_probe(object(), "dispatch", "sim-host", "cpu") is None


def test_local_simulation_without_a_run_uses_the_probes(tmp_path: Path) -> None:
    probes = (
        ("matmul", {**MATMUL, "threads": 2, "quick": False}),
        ("dispatch", {"seconds_per_op": 2e-5, "quick": False, "contention": {"verdict": "quiet"}}),
    )
    with _store(tmp_path, *probes) as store:
        cluster = resolve_cluster("local", store, device="cpu", threads_per_worker=2, env=MACHINE)
        device = cluster.device
        assert device.peak_for("bf16") == 2e11 and device.efficiency == PROBED_EFFICIENCY
        assert device.op_overhead_s == 2e-5 and "dispatch probe" in device.source
        setup = calibrate("mnist-cnn", cluster, store, precision="bf16")
    cal = setup.calibration
    assert cal.source == "peak"
    ops = setup.layout.ops_per_step
    assert ops and cal.compute_fixed_s == pytest.approx(ops * 2e-5)
    assert cal.compute_s_per_sample == pytest.approx(
        cal.flops_per_sample / (2e11 * PROBED_EFFICIENCY)
    )


def test_without_probes_a_local_device_still_needs_a_run(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        cluster = resolve_cluster("local", store, device="cpu", threads_per_worker=2, env=MACHINE)
        with pytest.raises(CalibrationError, match="no peak_flops.*`trainscale probe`"):
            calibrate("mnist-cnn", cluster, store, precision="fp32")
