"""A workload with no run on a device, predicted from rates fitted to other workloads' runs
there (per operator and per FLOP): the simulator's held-out check on one GPU."""

from __future__ import annotations

import pytest

from trainscale.results.store import RunStore
from trainscale.simulator.cross_workload import (
    calibrate_from_other_workloads,
    fit_step_rates,
)
from trainscale.simulator.setup import calibrate, resolve_cluster

from tests.helpers.simulate import MACHINE, add_measured_run, run_id

# A launch-bound GPU: 1 ms a step, 20 us an operator, 50 TFLOP/s.
PER_STEP, PER_OP, PER_FLOP = 1e-3, 20e-6, 1 / 50e12


def _step(ops: int, flops_per_sample: int, batch: int) -> float:
    return PER_STEP + PER_OP * ops + PER_FLOP * flops_per_sample * batch


def test_the_rates_are_recovered_from_steps_they_made() -> None:
    counts = [(160, 3e9), (1177, 7e10), (90, 2e11), (30, 1e9)]
    rates = fit_step_rates([(o, f, PER_STEP + PER_OP * o + PER_FLOP * f) for o, f in counts])
    assert rates.seconds_per_step == pytest.approx(PER_STEP, rel=1e-6)
    assert rates.seconds_per_op == pytest.approx(PER_OP, rel=1e-6)
    assert rates.seconds_per_flop == pytest.approx(PER_FLOP, rel=1e-6)
    assert rates.worst_misfit == pytest.approx(0, abs=1e-9)
    assert rates.step_s(500, 1e10) == pytest.approx(_step(500, 10**10, 1))


def test_a_rate_the_runs_would_make_negative_is_zero_instead() -> None:
    # Steps that fall as FLOPs grow: an unconstrained fit gives FLOPs a negative cost.
    rates = fit_step_rates([(100, 1e9, 3e-3), (100, 1e12, 2e-3), (200, 1e9, 5e-3)])
    assert rates.seconds_per_flop == 0 and rates.seconds_per_op > 0
    with pytest.raises(ValueError):
        fit_step_rates([(100, 1e9, 0.0)])


def test_other_workloads_runs_predict_a_workload_that_never_ran(tmp_path) -> None:
    ops = {"mnist-cnn": 33, "mnist-dbn": 26, "cifar10-resnet44": 451, "tweets-text": 71}
    flops = {
        "mnist-cnn": 71_565_312,
        "mnist-dbn": 6_000_000,
        "cifar10-resnet44": 582_160_128,
        "tweets-text": 20_000_000,
    }
    with RunStore(tmp_path / "s.db") as store:
        for n, name in enumerate(("mnist-cnn", "mnist-dbn", "cifar10-resnet44")):
            step = _step(ops[name], flops[name], 64)
            add_measured_run(
                store, run_id(n), workload=name, step_s=step, flops_per_sample=flops[name]
            )
        # Another precision and a two-worker run: not the device's serial fp32 steps.
        add_measured_run(store, run_id(7), workload="mnist-dbn", step_s=9.0, precision="bf16")
        add_measured_run(store, run_id(8), workload="mnist-dbn", step_s=9.0, workers=2)
        # A run on a busy machine: its step is its neighbours' too.
        add_measured_run(store, run_id(9), workload="mnist-dbn", step_s=9.0)
        assert store.add_to_summary(run_id(9), {"contention": {"verdict": "busy"}})
        cluster = resolve_cluster("local", store, device="cpu", threads_per_worker=1, env=MACHINE)
        runs = store.list_runs(status="completed")
        cal = calibrate_from_other_workloads(
            "tweets-text",
            runs,
            cluster.device,
            "fp32",
            ops_per_step=ops["tweets-text"],
            flops_per_sample=flops["tweets-text"],
            reference_batch_size=64,
            ops_of=ops.get,
        )
        assert cal is not None and cal.source == "workloads"
        assert set(cal.run_ids) == {run_id(0), run_id(1), run_id(2)}
        assert cal.compute_s(64) == pytest.approx(_step(71, flops["tweets-text"], 64), rel=1e-4)
        assert "cifar10-resnet44, mnist-cnn, mnist-dbn" in cal.notes[0]
        # Two other workloads fix three rates only along a line: the peak path decides.
        only_two = [r for r in runs if r.workload in ("mnist-cnn", "mnist-dbn")]
        assert (
            calibrate_from_other_workloads(
                "tweets-text",
                only_two,
                cluster.device,
                "fp32",
                ops_per_step=71,
                flops_per_sample=1e7,
                reference_batch_size=64,
                ops_of=ops.get,
            )
            is None
        )


def test_simulate_calibrates_from_other_workloads_before_any_peak(tmp_path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        add_measured_run(store, run_id(0), workload="mnist-cnn", step_s=0.02)
        add_measured_run(
            store, run_id(1), workload="mnist-dbn", step_s=0.01, flops_per_sample=10**7
        )
        add_measured_run(
            store, run_id(2), workload="cifar10-resnet44", step_s=0.2, flops_per_sample=6 * 10**8
        )
        cluster = resolve_cluster("local", store, device="cpu", threads_per_worker=1, env=MACHINE)
        setup = calibrate("tweets-text", cluster, store, precision="fp32")
    assert setup.calibration.source == "workloads"
    assert setup.calibration.compute_fixed_s > 0


def test_operators_are_counted_on_the_clusters_device_where_this_machine_has_it(
    monkeypatch,
) -> None:
    from trainscale.simulator.cluster import load_preset
    from trainscale.simulator.setup import counting_device

    gpus = load_preset("v100-nvlink-ib")
    cpus = resolve_cluster("local", None, device="cpu", threads_per_worker=1, env=MACHINE)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert counting_device(gpus) == "cpu" and counting_device(cpus) == "cpu"
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert counting_device(gpus) == "cuda" and counting_device(cpus) == "cpu"
