"""Calibration from stored fixture runs, the probe plug-in, and validation arithmetic."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainscale.results.store import RunStore
from trainscale.simulator.calibrate import (
    DEFAULT_BACKWARD_SHARE,
    CalibrationError,
    calibrate_from_peak,
    calibrate_from_runs,
    fit_compute,
    fit_effective_link,
    matching_serial_runs,
    probe_link,
)
from trainscale.simulator.cluster import DeviceSpec, LinkSpec, load_preset
from trainscale.simulator.predict import predict_one
from trainscale.simulator.run_facts import cores_per_worker, is_measured, run_breakdown
from trainscale.simulator.stragglers import sigma_from_spread
from trainscale.simulator.validate import (
    ValidationReport,
    ValidationRow,
    measured_throughput,
    validate_runs,
)

from tests.helpers.simulate import (
    MACHINE,
    add_emulation,
    add_measured_run,
    calibration,
    cluster,
    run_id,
    tiny_layout,
)

BREAKDOWN = {"data": 0.001, "forward": 0.03, "backward": 0.06, "optimizer": 0.009}


@pytest.fixture
def store(tmp_path):
    with RunStore(tmp_path / "sim.db") as opened:
        yield opened


def test_fit_compute_is_affine_in_the_batch():
    assert fit_compute([(32, 0.05), (128, 0.17)]) == pytest.approx((0.01, 0.00125))
    # one batch size: proportional
    assert fit_compute([(64, 0.1), (64, 0.12)]) == pytest.approx((0.0, 0.11 / 64))
    # a negative intercept (noise) is refitted through the origin
    fixed, per = fit_compute([(10, 0.001), (100, 0.2)])
    assert fixed == 0.0 and per > 0


def test_breakdown_is_scaled_to_the_median_step(store):
    add_measured_run(store, run_id(1), step_s=0.2, breakdown=BREAKDOWN)
    parts = run_breakdown(store.get_run(run_id(1)))
    assert sum(parts.values()) == pytest.approx(0.2)
    assert parts["backward"] / parts["forward"] == pytest.approx(2.0)


def test_a_run_of_unequal_steps_calibrates_and_validates_on_its_mean_step(store):
    # Text steps are short, medium and long by design: the run's throughput is over its
    # mean step (metrics.throughput), and so are the simulator's compute and its check.
    add_measured_run(
        store, run_id(1), workload="imdb-bigru", step_s=0.1, mean_step_s=0.14, breakdown=BREAKDOWN
    )
    record = store.get_run(run_id(1))
    assert sum(run_breakdown(record).values()) == pytest.approx(0.14)
    cal = calibrate_from_runs([record], "imdb-bigru")
    step = cal.compute_s(64) + cal.optimizer_s + cal.data_s_per_sample * 64
    assert step == pytest.approx(0.14)
    assert measured_throughput(record) == pytest.approx(record.summary["samples_per_s"])
    assert measured_throughput(record) == pytest.approx(64 / 0.14)


def test_calibration_from_serial_runs(store):
    # compute = 0.01 + 0.00125 b at b = 32 and 128, plus 0.009 optimizer and no data
    for n, (batch, compute) in enumerate([(32, 0.05), (128, 0.17)]):
        parts = {"data": 0.0, "forward": compute / 3, "backward": 2 * compute / 3}
        add_measured_run(
            store,
            run_id(n),
            batch_size=batch,
            step_s=compute + 0.009,
            iqr_fraction=0.1,
            breakdown={**parts, "optimizer": 0.009},
        )
    runs = store.list_runs()
    cal = calibrate_from_runs(runs, "mnist-cnn")
    assert cal.compute_fixed_s == pytest.approx(0.01)
    assert cal.compute_s_per_sample == pytest.approx(0.00125)
    assert cal.backward_share == pytest.approx(2 / 3)
    assert cal.optimizer_s == pytest.approx(0.009)
    assert cal.straggler_sigma == pytest.approx(sigma_from_spread(1.0, 0.1))
    assert cal.reference_batch_size == 128 and cal.source == "runs"
    assert set(cal.run_ids) == {run_id(0), run_id(1)}
    # and one worker at a calibration batch predicts that run's median step
    exact = predict_one(
        calibration(per_sample=cal.compute_s_per_sample, fixed=0.01, optimizer=0.009),
        tiny_layout(),
        cluster(),
        1,
        128,
    )
    assert exact.step_time_s == pytest.approx(0.17 + 0.009)


def test_a_gradient_accumulation_run_predicts_its_own_step(store):
    # Batch 64 in 2 micro-batches of 32: the step is 2 x compute(32), not compute(64) / 2.
    add_measured_run(store, run_id(1), batch_size=64, step_s=0.14, breakdown=None, grad_accum=2)
    cal = calibrate_from_runs([store.get_run(run_id(1))], "mnist-cnn")
    again = predict_one(cal, tiny_layout(), cluster(), 1, 64, grad_accum=2)
    assert again.step_time_s == pytest.approx(0.14, rel=0.02)


def test_a_run_without_breakdown_counts_as_compute(store):
    add_measured_run(store, run_id(1), step_s=0.12, breakdown=None)
    cal = calibrate_from_runs([store.get_run(run_id(1))], "mnist-cnn")
    assert cal.compute_s(64) == pytest.approx(0.12)
    assert cal.backward_share == pytest.approx(DEFAULT_BACKWARD_SHARE)
    assert any("no step-time breakdown" in note for note in cal.notes)


def test_a_calibration_run_of_another_workload_is_an_error(store):
    add_measured_run(store, run_id(1), workload="tweets-text")
    with pytest.raises(CalibrationError, match="is of workload tweets-text, not mnist-cnn"):
        calibrate_from_runs([store.get_run(run_id(1))], "mnist-cnn")


def test_emulations_never_calibrate(store):
    add_emulation(store, run_id(1))
    record = store.get_run(run_id(1))
    assert not is_measured(record)
    with pytest.raises(CalibrationError, match="emulation"):
        calibrate_from_runs([record], "mnist-cnn")


@pytest.mark.parametrize("framework", ["tensorflow", "jax"])
def test_runs_of_another_framework_neither_calibrate_nor_are_validated(store, framework):
    # The simulator's model is DDP's step: another framework's step time would blend in.
    add_measured_run(store, run_id(1), step_s=0.1, breakdown=BREAKDOWN)
    add_measured_run(store, run_id(2), step_s=0.02, framework=framework)
    add_measured_run(store, run_id(3), step_s=0.02, framework=framework, repeat=1)
    device = DeviceSpec(kind="cpu", name="Test CPU 9000", match=("sim-host",))
    found = matching_serial_runs(store.list_runs(), "mnist-cnn", device, "fp32", cores=1)
    assert [r.run_id for r in found] == [run_id(1)]
    with pytest.raises(CalibrationError, match=f"is a {framework} run .*PyTorch DDP"):
        calibrate_from_runs([store.get_run(run_id(2))], "mnist-cnn")
    report = validate_runs(store.list_runs(), lambda w, cap: tiny_layout())
    assert report.calibration_run_ids == (run_id(1),)
    skipped = dict(report.skipped)
    assert set(skipped) == {run_id(2), run_id(3)}
    assert skipped[run_id(2)].startswith(f"a {framework} run")


def test_matching_serial_runs_filter_device_cores_and_oversubscription(store):
    add_measured_run(store, run_id(1))  # serial, 1 core: matches
    add_measured_run(store, run_id(2), workers=2)  # not serial
    add_measured_run(store, run_id(3), threads=2)  # 2 cores per worker
    add_measured_run(store, run_id(4), precision="bf16")
    add_measured_run(store, run_id(5), env={**MACHINE, "hostname": "other-host"})
    add_emulation(store, run_id(6))
    device = DeviceSpec(kind="cpu", name="Test CPU 9000", match=("sim-host",))
    found = matching_serial_runs(store.list_runs(), "mnist-cnn", device, "fp32", cores=1)
    assert [r.run_id for r in found] == [run_id(1)]


def test_cores_per_worker_and_oversubscription(store):
    add_measured_run(store, run_id(1), workers=2, threads=1)
    add_measured_run(store, run_id(2), workers=2, threads=1, pinned=False)
    add_measured_run(store, run_id(3), workers=2, threads=None, pinned=False)  # torch default
    assert cores_per_worker(store.get_run(run_id(1))) == (1, False)
    assert cores_per_worker(store.get_run(run_id(2))) == (1, False)
    assert cores_per_worker(store.get_run(run_id(3))) == (1, True)


def test_calibration_from_the_peak():
    v100 = load_preset("v100-nvlink-ib")
    cal = calibrate_from_peak(
        "mnist-cnn", v100.device, "fp32", 7e7, 1_200_000, reference_batch_size=64, ops_per_step=50
    )
    assert cal.compute_s_per_sample == pytest.approx(7e7 / (15.7e12 * 0.35))
    # 50 operators at the preset's 10 us each
    assert cal.compute_fixed_s == pytest.approx(50 * 10e-6)
    # Adam moves 28 bytes per parameter at 900 GB/s
    assert cal.optimizer_s == pytest.approx(1_200_000 * 28 / 900e9)
    with pytest.raises(CalibrationError, match="no peak_flops for bf16"):
        calibrate_from_peak("mnist-cnn", v100.device, "bf16", 7e7, 10, reference_batch_size=64)


def test_an_fp32_prediction_on_a_tf32_gpu_takes_the_peak_of_its_mix():
    a100 = load_preset("dgx-a100-40gb").device  # fp32 19.5, tf32 156 TFLOP/s
    efficiency = a100.efficiency

    def per_sample(kinds):
        cal = calibrate_from_peak(
            "mnist-cnn", a100, "fp32", 1e8, 10, reference_batch_size=64, flops_by_kind=kinds
        )
        return cal.compute_s_per_sample, cal.notes

    # torch's defaults: convolutions in TF32, matrix products in fp32.
    cnn, notes = per_sample({"convolution": 9, "matmul": 1})
    mixed = 1 / (0.9 / 156e12 + 0.1 / 19.5e12)
    assert cnn == pytest.approx(1e8 / (mixed * efficiency))
    assert any("10% in fp32, 90% in tf32" in note for note in notes)
    assert per_sample({"matmul": 1})[0] == pytest.approx(1e8 / (19.5e12 * efficiency))
    assert per_sample({"recurrent": 1})[0] == pytest.approx(1e8 / (156e12 * efficiency))
    # No split known, or a GPU without TF32: the fp32 peak.
    assert per_sample(None)[0] == pytest.approx(1e8 / (19.5e12 * efficiency))
    v100 = load_preset("v100-nvlink-ib").device
    cal = calibrate_from_peak(
        "mnist-cnn",
        v100,
        "fp32",
        1e8,
        10,
        reference_batch_size=64,
        flops_by_kind={"convolution": 1},
    )
    assert cal.compute_s_per_sample == pytest.approx(1e8 / (15.7e12 * v100.efficiency))


class FakeProbe:
    def __init__(self, result, workers=2, probe_id="probe0001aaaa"):
        self.result = result
        self.workers = workers
        self.probe_id = probe_id
        self.short_id = probe_id[:8]
        self.created_at = "2026-01-01T00:00:00+00:00"


class FakeStore:
    def __init__(self, probes):
        self.probes = probes
        self.asked = None

    def list_probes(self, **filters):
        self.asked = filters
        return self.probes


def test_the_probe_plugs_in_as_the_intra_node_link():
    quick = FakeProbe({"alpha_s": 1.0, "beta_s_per_byte": 1.0, "workers": 2, "quick": True})
    real = FakeProbe({"alpha_s": 1e-4, "beta_s_per_byte": 1e-9, "workers": 2, "quick": False})
    store = FakeStore([quick, real])
    link = probe_link(store, "sim-host", "cpu")
    assert store.asked == {"kind": "allreduce", "host": "sim-host", "device_type": "cpu"}
    # ring of 2: alpha = A / 2, beta = B
    assert link.alpha_s == pytest.approx(5e-5)
    assert link.bandwidth_bytes_per_s == pytest.approx(1e9)
    assert "probe" in link.source
    assert probe_link(FakeStore([quick]), "sim-host", "cpu") is None
    busy = FakeProbe({**real.result, "contention": {"verdict": "busy"}})
    assert probe_link(FakeStore([busy, real]), "sim-host", "cpu").alpha_s == pytest.approx(5e-5)
    assert probe_link(FakeStore([busy]), "sim-host", "cpu") is None
    assert probe_link(object(), "sim-host", "cpu") is None  # a store without probes


def test_an_effective_link_reproduces_the_step_it_was_fitted_to():
    cal = calibration(sigma=0.0)
    machine = cluster(overlap=0.0, devices=2)
    base = LinkSpec(1e-5, 1e9, "base")

    def predict_step(link, workers, batch):

        return predict_one(
            replace(cal, network=link), tiny_layout(), machine, workers, batch
        ).step_time_s

    target = predict_step(LinkSpec(1e-5, 3e8), 2, 32)
    fitted = fit_effective_link([(2, 32, target)], predict_step, base)
    assert fitted.bandwidth_bytes_per_s == pytest.approx(3e8, rel=1e-3)


def test_validation_arithmetic():
    def row(measured, predicted, over=False, setting="2 workers x 1 thread, pinned"):
        return ValidationRow(
            run_id="r" * 32,
            workload="mnist-cnn",
            setting=setting,
            workers=2,
            per_worker_batch=32,
            global_batch=64,
            oversubscribed=over,
            measured_step_s=measured,
            predicted_step_s=predicted,
            measured_samples_per_s=64 / measured,
            predicted_samples_per_s=64 / predicted,
            measured_exposed_comm_s=None,
            predicted_exposed_comm_s=0.0,
            calibration_runs=(),
        )

    rows = (
        row(0.1, 0.11),
        row(0.2, 0.19),
        row(0.1, 0.104),
        row(1.0, 0.5, over=True, setting="naive"),
    )
    assert rows[0].step_error == pytest.approx(0.1)
    assert rows[1].step_error == pytest.approx(-0.05)
    assert rows[0].throughput_error == pytest.approx(1 / 1.1 - 1)
    report = ValidationReport(rows, (), (), ())
    # |errors|: 0.1, 0.05, 0.04, 0.5 -> median 0.075; modelled only: 0.05
    assert report.median_abs_error() == pytest.approx(0.075)
    assert report.median_abs_error(modelled_only=True) == pytest.approx(0.05)
    settings = {s["setting"]: s for s in report.by_setting()}
    assert settings["naive"]["modelled"] is False
    assert settings["2 workers x 1 thread, pinned"]["runs"] == 3


def test_validation_holds_out_repeats_and_parallel_runs(store):
    # a serial configuration twice (the second is held out) and one 2-worker run
    add_measured_run(store, run_id(1), step_s=0.1, breakdown=BREAKDOWN)
    add_measured_run(store, run_id(2), step_s=0.11, breakdown=BREAKDOWN, repeat=1)
    add_measured_run(store, run_id(3), workers=2, batch_size=32, step_s=0.06)
    add_measured_run(store, run_id(4), workers=2, threads=None, pinned=False, step_s=0.5)
    add_measured_run(store, run_id(5), workload="tweets-text")  # no serial... it is one
    add_emulation(store, run_id(6))
    report = validate_runs(store.list_runs(), lambda w, cap: tiny_layout())
    held_out = {r.run_id: r for r in report.rows}
    assert set(report.calibration_run_ids) == {run_id(1), run_id(5)}
    assert set(held_out) == {run_id(2), run_id(3), run_id(4)}
    # the repeat is predicted at the first run's time
    assert held_out[run_id(2)].predicted_step_s == pytest.approx(0.1, rel=2e-3)
    assert held_out[run_id(2)].step_error == pytest.approx(0.1 / 0.11 - 1, abs=0.02)
    assert held_out[run_id(4)].oversubscribed and not held_out[run_id(4)].modelled
    assert held_out[run_id(3)].workers == 2
    # speedup against the serial run at the same global batch measured nearest in time
    paired = held_out[run_id(3)]
    assert paired.baseline_run == run_id(2)
    assert paired.measured_speedup == pytest.approx(0.11 / 0.06)
    assert paired.speedup_error == pytest.approx(
        paired.predicted_speedup / paired.measured_speedup - 1
    )
    assert held_out[run_id(2)].speedup_error is None
    assert report.median_abs_speedup_error() == pytest.approx(abs(paired.speedup_error))
    # explicit calibration runs: the others are held out
    explicit = validate_runs(
        store.list_runs(), lambda w, cap: tiny_layout(), calibrate_from=[store.get_run(run_id(2))]
    )
    assert explicit.calibration_run_ids == (run_id(2),)
    assert run_id(1) in {r.run_id for r in explicit.rows}
    assert run_id(5) in {run for run, _ in explicit.skipped}


def test_busy_runs_neither_calibrate_nor_count_as_held_out_errors(store):
    busy = {"contention": {"verdict": "busy", "reason": "other processes used 0.90 cores"}}
    # The oldest serial run ran busy (and slow): the next quiet one calibrates instead.
    add_measured_run(store, run_id(1), step_s=0.3, breakdown=BREAKDOWN)
    add_measured_run(store, run_id(2), step_s=0.1, breakdown=BREAKDOWN, repeat=1)
    add_measured_run(store, run_id(3), step_s=0.11, breakdown=BREAKDOWN, repeat=2)
    add_measured_run(store, run_id(4), workers=2, batch_size=32, step_s=0.06)
    assert store.add_to_summary(run_id(1), busy)
    assert store.add_to_summary(run_id(4), busy)
    report = validate_runs(store.list_runs(), lambda w, cap: tiny_layout())
    assert report.calibration_run_ids == (run_id(2),)
    assert {r.run_id for r in report.rows} == {run_id(3)}
    skipped = dict(report.skipped)
    assert set(skipped) == {run_id(1), run_id(4)}
    assert skipped[run_id(1)].startswith("ran on a busy machine")
    # Given explicitly, a busy run calibrates, and its calibration says it is not trusted.
    given = validate_runs(
        store.list_runs(), lambda w, cap: tiny_layout(), calibrate_from=[store.get_run(run_id(1))]
    )
    (cal,) = given.calibrations
    assert any(note.endswith("not trusted: busy machine") for note in cal.notes)
    assert run_id(1) not in dict(given.skipped)


def test_a_multi_worker_calibration_run_fits_an_effective_network(store):
    add_measured_run(store, run_id(1), step_s=0.1, breakdown=BREAKDOWN)
    add_measured_run(store, run_id(2), workers=2, batch_size=32, step_s=0.09)
    add_measured_run(store, run_id(3), workers=2, batch_size=64, step_s=0.15)
    given = [store.get_run(run_id(1)), store.get_run(run_id(2))]
    report = validate_runs(store.list_runs(), lambda w, cap: tiny_layout(), calibrate_from=given)
    (cal,) = report.calibrations
    assert cal.network is not None and "fitted" in cal.network.source
    assert set(cal.run_ids) == {run_id(1), run_id(2)}
    (row,) = report.rows
    assert row.run_id == run_id(3)
    # the fitted link reproduces the run it was fitted to
    machine = cluster(bandwidth=cal.network.bandwidth_bytes_per_s, overlap=0.0, devices=2)
    again = predict_one(cal, tiny_layout(), machine, 2, 32)
    assert again.step_time_s == pytest.approx(0.09, rel=0.02)
