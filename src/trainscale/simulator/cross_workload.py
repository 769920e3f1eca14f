"""Calibrating a workload that has not run on a device from the workloads that have.

A training step is a fixed cost per step (the loop's bookkeeping), a fixed cost per
dispatched operator (Python, autograd, the dispatcher, a kernel launch) and its arithmetic.
On a fast GPU at the reference workloads' batches the fixed costs dominate: their H200 steps
took 3-22 ms where their FLOPs needed well under one, so a FLOP-only prediction is off by
98%. Fitting the three rates to the serial runs of other workloads on the device,

    step ~ a + c x operators (one forward + backward, as `buckets.workload_layout` counts
               them on the device) + k x FLOPs per step (FLOPs per sample x batch),

and applying them to the workload's own counts predicts its step before it ever runs there:
the held-out check of the simulator on one GPU, and a calibrated answer for a user who has
run some workloads on a machine and asks about another. The fit is least squares on the
relative error (a 3 ms step and a 300 ms step count alike), every rate >= 0. The
optimizer's and the data's share of the step are carried by the rates as they are in the
fitting runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from trainscale.metrics import stats
from trainscale.metrics.run_flags import ran_busy
from trainscale.metrics.throughput import stored_step_time
from trainscale.results.records import RunRecord
from trainscale.simulator.calibrate import DEFAULT_BACKWARD_SHARE, Calibration
from trainscale.simulator.cluster import DeviceSpec
from trainscale.simulator.run_facts import (
    cores_per_worker,
    device_kind,
    is_measured,
    per_worker_batch,
    run_sigma,
)
from trainscale.simulator.stragglers import DEFAULT_SIGMA

MIN_WORKLOADS = 3
"""Three rates need three workloads at least: two would fix them only along a line."""


@dataclass(frozen=True)
class StepRates:
    """The fitted rates and how well they describe the runs they were fitted to."""

    seconds_per_step: float
    """What every step costs whatever the model: the loop's own bookkeeping."""
    seconds_per_op: float
    seconds_per_flop: float
    worst_misfit: float
    """The largest relative error among the fitting runs."""

    def step_s(self, ops: float, flops_per_step: float) -> float:
        """The step these rates give a workload of `ops` operators and `flops_per_step`."""
        return (
            self.seconds_per_step
            + self.seconds_per_op * ops
            + self.seconds_per_flop * flops_per_step
        )


def fit_step_rates(points: Sequence[tuple[float, float, float]]) -> StepRates:
    """Rates >= 0 minimising the squared relative error of `per step + per op x ops + per
    FLOP x flops` over (ops, flops per step, measured step seconds) points, by SciPy's
    non-negative least squares (the columns scaled to 1 first: FLOPs run to 1e12, steps
    to 1). Fewer workloads than rates fit many solutions equally well, which is why a
    calibration asks for MIN_WORKLOADS."""
    if not points or any(not (t > 0) or o < 0 or f < 0 for o, f, t in points):
        raise ValueError("points need ops >= 0, flops >= 0 and a positive step time")
    design = np.array([[1.0 / t, o / t, f / t] for o, f, t in points])
    scale = design.max(axis=0)
    scale[scale == 0] = 1.0
    scaled, _ = nnls(design / scale, np.ones(len(points)))
    per_step, per_op, per_flop = (float(x) for x in scaled / scale)
    misfit = design @ np.array([per_step, per_op, per_flop]) - 1.0
    return StepRates(per_step, per_op, per_flop, float(np.max(np.abs(misfit))))


def fitting_runs(
    records: Iterable[RunRecord], workload: str, device: DeviceSpec, precision: str
) -> list[RunRecord]:
    """Serial, measured runs of workloads other than `workload` on `device` at
    `precision` with their FLOPs recorded, not busy (the busy rule, `metrics.run_flags`); on
    a CPU, with the cores of a `device` worker."""
    chosen = []
    for record in records:
        if record.workload == workload:
            continue
        if not is_measured(record) or record.figures.flops_per_sample is None:
            continue
        if ran_busy(record.summary):  # its step is its neighbours' as much as the device's
            continue
        if (record.world_size or 1) != 1 or record.settings.grad_accum != 1:
            continue
        if device_kind(record) != device.kind or (record.precision or "fp32") != precision:
            continue
        if not device.matches(record.machine):
            continue
        if device.kind == "cpu":
            own, oversubscribed = cores_per_worker(record)
            if oversubscribed or (device.cores is not None and own != device.cores):
                continue
        chosen.append(record)
    return chosen


def calibrate_from_other_workloads(
    workload: str,
    records: Iterable[RunRecord],
    device: DeviceSpec,
    precision: str,
    *,
    ops_per_step: int | None,
    flops_per_sample: float,
    reference_batch_size: int,
    ops_of: Callable[[str], int | None],
    sigma_override: float | None = None,
) -> Calibration | None:
    """A calibration of `workload` from other workloads' runs on `device` (module doc), or
    None where fewer than MIN_WORKLOADS of them have runs and operator counts (`ops_of`)."""
    if not ops_per_step:
        return None
    candidates = fitting_runs(records, workload, device, precision)
    # Counting a workload's operators builds and runs its model: not for a fit that cannot be.
    if len({r.workload for r in candidates}) < MIN_WORKLOADS:
        return None
    points, used = [], []
    for record in candidates:
        ops = ops_of(record.workload) if record.workload else None
        run_flops = record.figures.flops_per_sample  # there: `fitting_runs` asks for them
        if not ops or run_flops is None:
            continue
        flops = run_flops * per_worker_batch(record)
        step = stored_step_time(record.summary)
        if not (math.isfinite(step) and step > 0):
            continue
        points.append((float(ops), flops, step))
        used.append(record)
    workloads = sorted({r.workload for r in used if r.workload})
    if len(workloads) < MIN_WORKLOADS:
        return None
    rates = fit_step_rates(points)
    sigmas = [s for s in (run_sigma(r) for r in used) if s is not None]
    if sigma_override is not None:
        sigma = sigma_override
    else:
        sigma = stats.median(sigmas) if sigmas else DEFAULT_SIGMA
    flop_rate = (
        f"FLOPs at {1 / rates.seconds_per_flop / 1e12:.3g} TFLOP/s"
        if rates.seconds_per_flop
        else "no cost per FLOP (the runs' steps are all per-operator cost)"
    )
    note = (
        f"no run of {workload} on this device: calibrated on {len(used)} run(s) of "
        f"{', '.join(workloads)}: {rates.seconds_per_step * 1e3:.3g} ms a step + "
        f"{rates.seconds_per_op * 1e6:.3g} us per operator x {ops_per_step} operators + "
        f"{flop_rate} (worst misfit of the fitting runs {rates.worst_misfit:.0%})"
    )
    return Calibration(
        workload=workload,
        device_kind=device.kind,
        device_name=device.name,
        precision=precision,
        source="workloads",
        compute_fixed_s=rates.seconds_per_step + rates.seconds_per_op * ops_per_step,
        compute_s_per_sample=rates.seconds_per_flop * flops_per_sample,
        backward_share=DEFAULT_BACKWARD_SHARE,
        optimizer_s=0.0,
        data_s_per_sample=0.0,
        straggler_sigma=sigma,
        reference_batch_size=reference_batch_size,
        run_ids=tuple(r.run_id for r in used),
        cores_per_worker=device.cores,
        flops_per_sample=flops_per_sample,
        notes=(note,),
    )
