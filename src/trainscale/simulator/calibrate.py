"""Calibration: what one worker of a workload costs on a device, from stored runs.

From serial (one-worker) runs of the workload on the device:

- compute time (forward + backward) per step as a function of the per-worker batch b,
  `fixed + per_sample x b`, fitted by least squares over the runs' batch sizes (with one
  batch size, proportional to b);
- backward's share of it, the optimizer's time (independent of b) and the data time per
  sample;
- the spread of a worker's compute time (a lognormal sigma, see `stragglers`).

A run's parts come from its recorded step-time breakdown (median seconds per phase), scaled
so that they add up to its median step time: the breakdown gives the proportions, the step
time the total. Without a breakdown the whole step counts as compute, 1/3 forward and 2/3
backward, and the calibration says so.

Without any run on the device, compute comes from the cluster file: training FLOPs per
sample / (peak x efficiency), and the optimizer from the memory bandwidth.

The network: a stored `trainscale probe` all-reduce fit of the machine (`probe_link`, the
one place the probe plugs in), else the cluster file. A multi-worker run given for
calibration fits an effective link instead (`fit_effective_link`): the bandwidth at which
the model reproduces that run's median step time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trainscale.data.tensors import DataRequest
from trainscale.errors import TrainscaleError
from trainscale.hardware.peaks import rate_of_mix
from trainscale.hardware.tf32 import TORCH_DEFAULT_TF32, precision_mix
from trainscale.metrics import stats
from trainscale.metrics.run_flags import ran_busy
from trainscale.metrics.throughput import stored_step_time
from trainscale.results.records import RunRecord
from trainscale.simulator.cluster import DeviceSpec, LinkSpec
from trainscale.simulator.collectives import link_from_allreduce_fit
from trainscale.simulator.run_facts import (
    cores_per_worker,
    device_kind,
    device_name,
    is_emulation,
    is_measured,
    per_worker_batch,
    run_breakdown,
    run_sigma,
    unmodelled_framework,
)
from trainscale.simulator.stragglers import DEFAULT_SIGMA
from trainscale.train.flops import count_flops_per_sample
from trainscale.workloads import get_workload

DEFAULT_BACKWARD_SHARE = 2.0 / 3.0
"""Backward does about twice forward's FLOPs (two matmuls per forward one)."""
OPTIMIZER_BYTES_PER_PARAM = {"sgd": 20, "adam": 28, "adamw": 28}
"""Bytes moved per parameter by one fp32 optimizer step: SGD with momentum reads the
parameter, gradient and buffer and writes two (5 x 4 bytes); Adam reads four, writes three."""


class CalibrationError(TrainscaleError):
    """The stored runs cannot calibrate what was asked (none fits, or a wrong one was given)."""


@dataclass(frozen=True)
class Calibration:
    """What one worker of a workload costs on one device."""

    workload: str
    device_kind: str
    device_name: str
    precision: str
    source: str
    """'runs' (measured), 'workloads' (rates fitted to other workloads' runs on the device,
    `cross_workload`) or 'peak' (the device's peak x efficiency: a cluster file's, or the
    probes' of the machine at hand)."""
    compute_fixed_s: float
    """Forward + backward time per step that does not grow with the batch."""
    compute_s_per_sample: float
    backward_share: float
    """Backward's share of forward + backward."""
    optimizer_s: float
    data_s_per_sample: float
    straggler_sigma: float
    reference_batch_size: int
    """The per-worker batch the calibration runs used (the largest, if several)."""
    run_ids: tuple[str, ...] = ()
    cores_per_worker: int | None = None
    data_kind: str | None = None
    flops_per_sample: float | None = None
    notes: tuple[str, ...] = ()
    network: LinkSpec | None = None
    """An effective link fitted from multi-worker runs (replaces the cluster's)."""

    def compute_s(self, batch_size: float) -> float:
        """Forward + backward seconds of one worker at per-worker batch `batch_size`."""
        return self.compute_fixed_s + self.compute_s_per_sample * batch_size

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "device_kind": self.device_kind,
            "device_name": self.device_name,
            "precision": self.precision,
            "source": self.source,
            "compute_fixed_s": self.compute_fixed_s,
            "compute_s_per_sample": self.compute_s_per_sample,
            "backward_share": self.backward_share,
            "optimizer_s": self.optimizer_s,
            "data_s_per_sample": self.data_s_per_sample,
            "straggler_sigma": self.straggler_sigma,
            "reference_batch_size": self.reference_batch_size,
            "run_ids": list(self.run_ids),
            "cores_per_worker": self.cores_per_worker,
            "data_kind": self.data_kind,
            "flops_per_sample": self.flops_per_sample,
            "notes": list(self.notes),
            "network": None
            if self.network is None
            else {
                "alpha_s": self.network.alpha_s,
                "bandwidth_bytes_per_s": self.network.bandwidth_bytes_per_s,
                "source": self.network.source,
            },
        }


# -- checks ----------------------------------------------------------------------------------


def check_calibration_run(record: RunRecord, workload: str) -> None:
    """CalibrationError (one line) unless `record` can calibrate `workload`."""
    if is_emulation(record):
        raise CalibrationError(
            f"run {record.short_id} is an accuracy emulation; calibrate from measured runs"
        )
    if record.workload != workload:
        raise CalibrationError(
            f"calibration run {record.short_id} is of workload {record.workload}, not {workload}"
        )
    if record.status != "completed":
        raise CalibrationError(
            f"calibration run {record.short_id} is {record.status}; only completed runs calibrate"
        )
    other_framework = unmodelled_framework(record)
    if other_framework:
        raise CalibrationError(f"calibration run {record.short_id} is {other_framework}")
    if not is_measured(record):
        raise CalibrationError(f"calibration run {record.short_id} has no measured step time")


# -- fitting -----------------------------------------------------------------------------


@dataclass
class _Point:
    run_id: str
    batch: int
    compute_s: float
    backward_share: float | None
    optimizer_s: float
    data_s: float
    sigma: float | None
    flops: float | None
    notes: list[str] = field(default_factory=list)


def _point(record: RunRecord) -> _Point:
    """One run's compute at its micro-batch: with gradient accumulation K a step computes K
    micro-batches of batch/K, so the point is (batch/K, compute/K), as `predict` rebuilds a
    step (K x compute(batch/K))."""
    step = stored_step_time(record.summary)
    accum = record.settings.grad_accum
    batch = max(1, per_worker_batch(record) // accum)
    parts = run_breakdown(record)
    flops = record.figures.flops_per_sample
    wait = record.figures.data_wait_s_median
    if parts is None and wait is not None and 0 <= wait < step:
        # A script run has no breakdown, but its meter measured the wait for each batch:
        # that much of the step is data, the rest compute (split as DEFAULT_BACKWARD_SHARE).
        compute = step - float(wait)
        return _Point(
            record.run_id,
            batch,
            compute / accum,
            DEFAULT_BACKWARD_SHARE,
            0.0,
            float(wait),
            run_sigma(record),
            flops,
            [
                f"run {record.short_id} has no step-time breakdown: its step less its data "
                "wait is compute"
            ],
        )
    if parts is None:
        return _Point(
            record.run_id,
            batch,
            step / accum,
            None,
            0.0,
            0.0,
            run_sigma(record),
            flops,
            [f"run {record.short_id} has no step-time breakdown: its whole step is compute"],
        )
    compute = parts["forward"] + parts["backward"]
    return _Point(
        record.run_id,
        batch,
        compute / accum,
        parts["backward"] / compute if compute > 0 else None,
        parts["optimizer"],
        parts["data"],
        run_sigma(record),
        flops,
    )


def fit_compute(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(fixed, per_sample) of compute = fixed + per_sample x batch, least squares.

    One distinct batch size: proportional (fixed = 0). A negative intercept (noise) is
    refitted through the origin, so that no batch predicts a negative time.
    """
    if not points:
        raise ValueError("no calibration points")
    batches = {b for b, _ in points}
    through_origin = sum(b * t for b, t in points) / sum(b * b for b, _ in points)
    if len(batches) < 2:
        return 0.0, through_origin
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    sxx = sum((b - mean_b) ** 2 for b, _ in points)
    sxy = sum((b - mean_b) * (t - mean_t) for b, t in points)
    slope = sxy / sxx
    intercept = mean_t - slope * mean_b
    if intercept < 0 or slope <= 0:
        return 0.0, through_origin
    return intercept, slope


def calibrate_from_runs(
    records: Sequence[RunRecord],
    workload: str,
    *,
    sigma_override: float | None = None,
    fallback_sigma: float | None = None,
    fallback_note: str | None = None,
) -> Calibration:
    """A calibration from serial runs of `workload` on one device (checked by the caller).

    `fallback_sigma` replaces the runs' own spread when that spread is not straggling (see
    `spread_is_shared`); `sigma_override` replaces it in every case.
    """
    if not records:
        raise CalibrationError(f"no serial run of {workload} to calibrate from")
    for record in records:
        check_calibration_run(record, workload)
    serial = [r for r in records if (r.world_size or 1) == 1]
    if not serial:
        raise CalibrationError(
            f"no serial (one-worker) run of {workload} among the calibration runs; compute "
            "time is calibrated from serial runs"
        )
    kinds = {(device_kind(r), r.precision) for r in serial}
    if len(kinds) > 1:
        shown = ", ".join(f"{k} {p}" for k, p in sorted(kinds, key=str))
        raise CalibrationError(
            f"calibration runs of {workload} mix devices or precisions ({shown}); give runs "
            "of one device and precision"
        )
    points = [_point(r) for r in serial]
    fixed, per_sample = fit_compute([(p.batch, p.compute_s) for p in points])
    shares = [p.backward_share for p in points if p.backward_share is not None]
    notes = [note for p in points for note in p.notes]
    sigmas = [p.sigma for p in points if p.sigma is not None]
    if sigma_override is not None:
        sigma = sigma_override
        notes.append(f"straggler sigma {sigma:g} given on the command line")
    elif fallback_sigma is not None:
        sigma = fallback_sigma
        if fallback_note:
            notes.append(fallback_note)
    elif sigmas:
        sigma = stats.median(sigmas)
    else:
        sigma = DEFAULT_SIGMA
        notes.append(f"no step-time spread recorded: straggler sigma {DEFAULT_SIGMA:g} assumed")
    flops = [p.flops for p in points if p.flops is not None]
    cores = {cores_per_worker(r)[0] for r in serial}
    first = serial[0]
    return Calibration(
        workload=workload,
        device_kind=device_kind(first),
        device_name=device_name(first),
        precision=str(first.precision or "fp32"),
        source="runs",
        compute_fixed_s=fixed,
        compute_s_per_sample=per_sample,
        backward_share=stats.median(shares) if shares else DEFAULT_BACKWARD_SHARE,
        optimizer_s=stats.median([p.optimizer_s for p in points]),
        data_s_per_sample=stats.median([p.data_s / p.batch for p in points]),
        straggler_sigma=sigma,
        reference_batch_size=max(p.batch for p in points),
        run_ids=tuple(r.run_id for r in serial),
        cores_per_worker=min(cores) if len(cores) == 1 else None,
        data_kind=first.data_kind,
        flops_per_sample=stats.median(flops) if flops else None,
        notes=tuple(dict.fromkeys(notes)),
    )


def spread_is_shared(workload: str) -> bool:
    """Whether a workload's step-time spread is mostly the same on every worker.

    Workloads that order batches by length (text) vary step to step because the batches
    differ, and every worker gets batches alike at the same step: that spread makes no
    straggler, so it must not be used as the per-worker spread.
    """
    return get_workload(workload).batch_order is not None


def device_sigma(records: Iterable[RunRecord]) -> float | None:
    """The device's own spread: the smallest sigma of serial runs of workloads whose batches
    do not vary (the least disturbed measurement of this device's noise)."""
    sigmas = []
    for record in records:
        if (record.world_size or 1) != 1 or not record.workload or not is_measured(record):
            continue
        try:
            shared = spread_is_shared(record.workload)
        except TrainscaleError:
            continue
        sigma = run_sigma(record)
        if not shared and sigma is not None:
            sigmas.append(sigma)
    return min(sigmas) if sigmas else None


def shared_spread_sigma(
    workload: str, device_records: Iterable[RunRecord]
) -> tuple[float | None, str | None]:
    """(sigma, note) to use instead of a workload's own spread, when that spread is shared
    by all workers (`spread_is_shared`); (None, None) when its own spread is the right one.

    The device's own spread comes from `device_sigma` over `device_records` (serial runs of
    the same device), else the default.
    """
    if not spread_is_shared(workload):
        return None, None
    sigma = device_sigma(device_records)
    reason = (
        f"{workload} orders batches by length, so its step-time spread is shared by all "
        "workers and makes no straggler; straggler sigma "
    )
    if sigma is None:
        return DEFAULT_SIGMA, reason + f"{DEFAULT_SIGMA:g} (default: no other serial run)"
    return sigma, reason + f"{sigma:.3g}, from the least noisy serial run of the device"


def calibrate_from_peak(
    workload: str,
    device: DeviceSpec,
    precision: str,
    flops_per_sample: float,
    num_params: int,
    *,
    reference_batch_size: int,
    ops_per_step: int | None = None,
    sigma_override: float | None = None,
    flops_by_kind: Mapping[str, int] | None = None,
) -> Calibration:
    """A calibration from the cluster file alone: training FLOPs / (peak x efficiency), plus
    the device's per-operator overhead for each operator a step dispatches. On a GPU in fp32
    the peak is that of the run's mix of TF32 and fp32 work (`peak_of_work`)."""
    peak, mixed = peak_of_work(device, precision, flops_by_kind)
    if peak is None or device.efficiency is None:
        missing = "peak_flops" if peak is None else "efficiency"
        threads = f" --threads-per-worker {device.cores}" if device.kind == "cpu" else ""
        raise CalibrationError(
            f"no stored serial run of {workload} on {device.name} ({precision}), and the "
            f"cluster's device gives no {missing} for {precision}; run it once with "
            f"`trainscale run {workload} --workers 1{threads} --precision {precision}` or "
            "give --calibrate-from"
        )
    notes = [
        f"compute from the device's peak: {flops_per_sample / 1e6:.4g} MFLOP per sample / "
        f"({peak / 1e12:.4g} TFLOP/s x {device.efficiency:g}); no run on this device"
    ]
    if mixed:
        notes.append(mixed)
    fixed = 0.0
    if device.op_overhead_s and ops_per_step:
        fixed = device.op_overhead_s * ops_per_step
        notes.append(
            f"fixed per step: {ops_per_step} operators x {device.op_overhead_s * 1e6:.3g} us"
        )
    optimizer = get_workload(workload).recipe.optimizer
    optimizer_s = 0.0
    if device.memory_bandwidth:
        moved = num_params * OPTIMIZER_BYTES_PER_PARAM.get(optimizer, 28)
        optimizer_s = moved / device.memory_bandwidth
        notes.append(f"optimizer ({optimizer}) from memory bandwidth: {moved / 1e6:.3g} MB moved")
    else:
        notes.append("no memory bandwidth in the cluster file: optimizer time taken as 0")
    sigma = sigma_override if sigma_override is not None else device.straggler_sigma
    if sigma is None:
        sigma = DEFAULT_SIGMA
        notes.append(f"straggler sigma {DEFAULT_SIGMA:g} assumed")
    return Calibration(
        workload=workload,
        device_kind=device.kind,
        device_name=device.name,
        precision=precision,
        source="peak",
        compute_fixed_s=fixed,
        compute_s_per_sample=flops_per_sample / (peak * device.efficiency),
        backward_share=DEFAULT_BACKWARD_SHARE,
        optimizer_s=optimizer_s,
        data_s_per_sample=0.0,
        straggler_sigma=sigma,
        reference_batch_size=reference_batch_size,
        cores_per_worker=device.cores,
        flops_per_sample=flops_per_sample,
        notes=tuple(notes),
    )


# -- choosing runs ------------------------------------------------------------------------


def matching_serial_runs(
    records: Iterable[RunRecord],
    workload: str,
    device: DeviceSpec,
    precision: str,
    *,
    cores: int | None = None,
    data_kind: str | None = None,
) -> list[RunRecord]:
    """Completed serial runs of `workload` that measured `device` at `precision`.

    On a CPU, also with `cores` cores per worker (when given) and not oversubscribed.
    Newest first, as the store lists them.
    """
    chosen = []
    for record in records:
        if record.workload != workload or not is_measured(record):
            continue
        if (record.world_size or 1) != 1 or record.settings.grad_accum != 1:
            continue
        if device_kind(record) != device.kind or (record.precision or "fp32") != precision:
            continue
        if data_kind is not None and record.data_kind != data_kind:
            continue
        if not device.matches(record.machine):
            continue
        if device.kind == "cpu":
            own, oversubscribed = cores_per_worker(record)
            if oversubscribed or (cores is not None and own != cores):
                continue
        chosen.append(record)
    return chosen


def peak_of_work(
    device: DeviceSpec, precision: str, flops_by_kind: Mapping[str, int] | None
) -> tuple[float | None, str]:
    """The device's peak for a run's work, and a note where it is a mix: on a GPU in fp32,
    PyTorch computes convolutions and recurrent layers in TF32 and matrix products in full
    fp32 by default (`hardware.tf32`), each part at its precision's peak; a device without
    a TF32 peak computes all of it in fp32."""
    if device.kind != "cuda" or precision != "fp32" or device.peak_for("tf32") is None:
        return device.peak_for(precision), ""
    mix = precision_mix(precision, "cuda", TORCH_DEFAULT_TF32, flops_by_kind)
    if not mix:  # no split by kind: the fp32 peak, as before the split was known
        return device.peak_for(precision), ""
    peak = rate_of_mix(mix, device.peak_for)
    if len(mix) == 1:
        return peak, ""
    shares = ", ".join(f"{share:.0%} in {p}" for p, share in sorted(mix.items()))
    return peak, f"fp32 on a GPU as PyTorch computes it by default: {shares} (`hardware/tf32.py`)"


def training_flops_per_sample(
    workload: str, records: Iterable[RunRecord] = (), counted: float | None = None
) -> float:
    """Training FLOPs per sample: from a stored run of the workload, else `counted` (the
    count of its layout's pass, `GradientLayout.flops_per_sample`), else counted now."""
    for record in records:
        flops = record.figures.flops_per_sample
        if record.workload == workload and flops is not None:
            return flops
    if counted:  # the model was built and run for its layout: no second pass
        return counted

    spec = get_workload(workload)
    data = spec.make_synthetic(DataRequest(max_train=2, max_test=2))
    model = spec.build_model(data.meta)
    counted = count_flops_per_sample(model, data.train_x[:2], data.train_y[:2], spec)
    if not counted:
        raise CalibrationError(
            f"cannot count the FLOPs of {workload}, and no stored run records them"
        )
    return float(counted)


# -- the network ----------------------------------------------------------------------------


def probe_link(
    store: Any, host: str | None, device_type: str, device: str | None = None
) -> LinkSpec | None:
    """The intra-node link measured by `trainscale probe` on `host`, or None.

    This is where probe measurements plug in: the newest stored all-reduce probe of the
    host and device type (quick probes, being smoke tests, and busy ones, which measured
    their neighbours too, are skipped). The probe fits the whole collective, t(n) = A + B n
    at p processes; the link is what a ring of p ranks needs to take that long
    (`link_from_allreduce_fit`).
    """
    lister = getattr(store, "list_probes", None)
    if lister is None or host is None:
        return None
    try:
        probes = lister(kind="allreduce", host=host, device_type=device_type)
    except TrainscaleError:
        return None
    for probe in probes:
        result: Mapping[str, Any] = probe.result or {}
        alpha, beta = result.get("alpha_s"), result.get("beta_s_per_byte")
        ranks = int(result.get("workers") or probe.workers or 0)
        busy = ran_busy(result)
        if result.get("quick") or busy or ranks < 2:  # a smoke test, or its neighbours' too
            continue
        if not isinstance(alpha, (int, float)) or not isinstance(beta, (int, float)):
            continue
        if beta <= 0 or alpha < 0:
            continue
        link = link_from_allreduce_fit(float(alpha), float(beta), ranks)
        return LinkSpec(
            alpha_s=link.alpha_s,
            bandwidth_bytes_per_s=1.0 / link.beta_s_per_byte,
            name=f"probe {probe.short_id}",
            source=(
                f"trainscale probe {probe.short_id} ({probe.created_at[:10]}): all-reduce of "
                f"{ranks} processes, alpha {alpha * 1e6:.3g} us, "
                f"{1 / beta / 1e9:.3g} GB/s algorithm bandwidth"
            ),
        )
    return None


def fit_effective_link(
    measured_step_s: Sequence[tuple[int, int, float]],
    predict_step_s: Any,
    base: LinkSpec,
) -> LinkSpec:
    """The bandwidth (alpha kept) at which the model reproduces measured step times.

    `measured_step_s` holds (workers, per-worker batch, median step s) of multi-worker runs;
    `predict_step_s(link, workers, batch)` is the model's median step at that link. The
    bandwidth is found by bisection on a log scale (the step time falls as bandwidth grows);
    it is the median over the runs. What the network does not explain (memory contention,
    DDP's own bookkeeping) is thus charged to the network: an effective, not a physical,
    link.
    """
    fitted = []
    for workers, batch, measured in measured_step_s:
        low, high = 1e3, 1e13  # bytes/s: a modem to a very fast bus

        def at(bandwidth: float, w: int = workers, b: int = batch) -> float:
            return predict_step_s(replace(base, bandwidth_bytes_per_s=bandwidth), w, b)

        if at(high) >= measured:
            fitted.append(high)
            continue
        if at(low) <= measured:
            fitted.append(low)
            continue
        for _ in range(60):
            middle = math.sqrt(low * high)
            if at(middle) > measured:
                low = middle
            else:
                high = middle
        fitted.append(math.sqrt(low * high))
    bandwidth = stats.median(fitted)
    return replace(
        base,
        bandwidth_bytes_per_s=bandwidth,
        name="effective (fitted)",
        source=(
            f"fitted to the median step time of {len(fitted)} multi-worker run(s): "
            f"{bandwidth / 1e9:.3g} GB/s at alpha {base.alpha_s * 1e6:.3g} us"
        ),
    )
