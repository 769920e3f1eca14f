"""A user's own training script as the simulator's workload: its stored runs calibrate it, and
the parameter sizes its meter recorded make its gradient buckets.

A script run is stored as `script:NAME.py`, with the script's SHA-256. The simulator cannot
build a script's model, so it lays the buckets out from the sizes the run recorded where the
script gave the meter its model (`trainscale.meter(model=model)`), each tensor's share of
backward compute being its element count. Only runs of the newest digest are found (the
script as it was last measured): an edited script may train another model at another speed.
Runs named with `--calibrate-from` are used as given, as for a workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from trainscale.results.records import RunRecord
from trainscale.results.store import RunStore
from trainscale.runner.script_launch import is_script
from trainscale.simulator.buckets import GradientLayout, recorded_layout
from trainscale.simulator.calibrate import (
    Calibration,
    CalibrationError,
    calibrate_from_runs,
    matching_serial_runs,
)
from trainscale.simulator.cluster import ClusterSpec
from trainscale.simulator.run_facts import is_measured
from trainscale.simulator.setup import Setup, fit_network, load_given_runs

SCRIPT_PREFIX = "script:"
SCRIPT_PRECISION = "script"
"""A script run's stored precision: the script decides its own."""


def script_name(target: str | None) -> str | None:
    """The stored name of a script target (`script:train.py` as given, or the path of a
    training script); None for a workload."""
    if not target:
        return None
    if target.startswith(SCRIPT_PREFIX):
        return target
    return f"{SCRIPT_PREFIX}{Path(target).name}" if is_script(target) else None


def newest_script_runs(store: RunStore, name: str) -> list[RunRecord]:
    """Completed measured runs of script `name` whose script had the newest run's SHA-256,
    newest first; CalibrationError (one line) when there is none."""
    runs = [r for r in store.list_runs(workload=name, status="completed") if is_measured(r)]
    if not runs:
        file = name.removeprefix(SCRIPT_PREFIX)
        raise CalibrationError(
            f"no completed run of {name} in {store.path}; measure it first, e.g. "
            f"`trainscale run {file} --workers 1 --threads-per-worker 1 -- ARGS`"
        )
    digest = runs[0].settings.script_sha256
    return [r for r in runs if r.settings.script_sha256 == digest]


def script_layout(record: RunRecord, bucket_cap_mb: float | None) -> GradientLayout:
    """The gradient buckets from the parameter sizes `record` stored; CalibrationError (one
    line) for a run whose script did not give the meter its model."""
    parameters = record.summary.get("model_parameters")
    if not parameters:
        raise CalibrationError(
            f"script run {record.short_id} of {record.workload} recorded no model sizes, which "
            "the simulator needs for the gradient buckets: pass the model to the meter, "
            "`meter = trainscale.meter(model=model)`, and run the script again"
        )
    try:
        return recorded_layout(parameters, bucket_cap_mb)
    except ValueError as error:
        raise CalibrationError(f"script run {record.short_id}: {error}") from None


def calibrate_script(
    name: str,
    cluster: ClusterSpec,
    store: RunStore,
    *,
    run_ids: Sequence[str] = (),
    bucket_cap_mb: float | None = None,
    sigma_override: float | None = None,
) -> Setup:
    """Calibrate script `name` for `cluster`'s device from the given runs (serial ones for
    compute, multi-worker ones for an effective link) or from its newest serial runs on
    that device; the buckets from the newest calibration run's recorded sizes."""
    given = load_given_runs(store, run_ids, name, cluster)
    runs = given or newest_script_runs(store, name)
    newest = max(runs, key=lambda r: r.created_at)
    layout = script_layout(newest, bucket_cap_mb)  # without its sizes nothing else matters
    if given:
        serial = [r for r in given if (r.world_size or 1) == 1]
    else:
        cores = cluster.device.cores if cluster.device.kind == "cpu" else None
        found = matching_serial_runs(runs, name, cluster.device, SCRIPT_PRECISION, cores=cores)
        serial = [r for r in found if r.data_kind == found[0].data_kind] if found else []
        if not serial:
            raise CalibrationError(_no_serial_run(name, cluster, cores))
    calibration = calibrate_from_runs(serial, name, sigma_override=sigma_override)
    parallel = [r for r in given if (r.world_size or 1) > 1]
    if parallel:
        calibration = fit_network(calibration, parallel, layout, cluster)
    notes = [
        f"gradient buckets from the {layout.num_tensors} parameter tensors run "
        f"{newest.short_id} recorded (trainscale.meter(model=...)); backward compute "
        "spread over them by their sizes"
    ]
    if len({r.settings.script_sha256 for r in given}) > 1:
        notes.append("the calibration runs measured different versions of the script")
    return Setup(name, cluster, _with_notes(calibration, notes), layout)


def _no_serial_run(name: str, cluster: ClusterSpec, cores: int | None) -> str:
    file = name.removeprefix(SCRIPT_PREFIX)
    threads = f" --threads-per-worker {cores}" if cores else ""
    on = f"{cluster.device.name}" + (f" with {cores} core(s) a worker" if cores else "")
    return (
        f"no serial run of {name} (its newest version) measured {on}, and a script's compute "
        f"is calibrated only from its runs; run `trainscale run {file} --workers 1{threads} "
        "-- ARGS` or give --calibrate-from"
    )


def _with_notes(calibration: Calibration, notes: Sequence[Any]) -> Calibration:
    return replace(calibration, notes=(*calibration.notes, *notes))
