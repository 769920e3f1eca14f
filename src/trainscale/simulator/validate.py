"""Validation: predict every stored measured run that calibration did not use, and the error.

Runs are grouped by what a calibration must share with them: workload, data kind, device
(kind, host, CPU model or GPU), precision, cores per worker and torch.compile. In each group
the serial runs calibrate the model (by default the first run of every distinct serial
configuration, so that its repeats are held out and show the run-to-run noise floor; or the
runs given explicitly). Every other run of the group is held out and predicted at its own
workers, per-worker batch, gradient accumulation and bucket cap, on its own machine: the
machine at hand as a cluster, from the run's stored environment, with the probe's link if
one is stored (or the cluster given).

The error of a run is predicted / measured - 1, for the median step time and for the
throughput. The median absolute error is reported over all held-out runs and over the ones
the model claims to describe: runs that oversubscribed their cores (more threads than
cores) are predicted as if they had not, and are reported apart as what the model misses.

Runs stored as busy (other work used their cores; the busy rule, `metrics.run_flags`) are
left out of both, each listed as skipped with the reason: their speed is the neighbours' as
much as the setting's, so it can neither calibrate the model nor judge it. A busy run given
explicitly to calibrate from is used, and its calibration carries the note that it is not
trusted. Runs of a user's own workload (or of one whose package is no longer installed) are
skipped too, with the reason: the simulator builds each workload's model to lay out its
gradients, and it does not run a user's code to validate the other runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from trainscale.errors import TrainscaleError
from trainscale.metrics import stats
from trainscale.metrics.run_flags import NOT_TRUSTED, ran_busy
from trainscale.metrics.throughput import stored_step_time, throughput
from trainscale.results.records import RunRecord
from trainscale.simulator.buckets import GradientLayout
from trainscale.simulator.calibrate import (
    Calibration,
    CalibrationError,
    calibrate_from_runs,
    check_calibration_run,
    shared_spread_sigma,
)
from trainscale.simulator.cluster import ClusterSpec, LinkSpec, local_cluster
from trainscale.simulator.predict import predict_one
from trainscale.simulator.run_facts import (
    cores_per_worker,
    device_kind,
    device_name,
    has_step_time,
    per_worker_batch,
    unmodelled_framework,
)
from trainscale.simulator.setup import fit_network
from trainscale.simulator.stragglers import DEFAULT_SAMPLES
from trainscale.workloads import get_workload

TARGET_MEDIAN_ABS_ERROR = 0.10


BUSY_SKIPPED = (
    "ran on a busy machine (other work used its cores): left out of calibration and validation"
)
"""Why a busy run is neither a calibration run nor a held-out one."""


@dataclass(frozen=True)
class ValidationRow:
    """One held-out run, measured against predicted."""

    run_id: str
    workload: str
    setting: str
    """How it ran, e.g. '2 workers x 1 thread, pinned'."""
    workers: int
    per_worker_batch: int
    global_batch: int
    oversubscribed: bool
    measured_step_s: float
    predicted_step_s: float
    measured_samples_per_s: float
    predicted_samples_per_s: float
    measured_exposed_comm_s: float | None
    predicted_exposed_comm_s: float
    calibration_runs: tuple[str, ...]
    notes: tuple[str, ...] = ()
    measured_speedup: float | None = None
    """Throughput over that of the serial run at the same global batch measured nearest in
    time (None for serial runs, or without such a run)."""
    predicted_speedup: float | None = None
    baseline_run: str | None = None

    @property
    def step_error(self) -> float:
        """Predicted / measured - 1 of the median step time."""
        return self.predicted_step_s / self.measured_step_s - 1.0

    @property
    def throughput_error(self) -> float:
        return self.predicted_samples_per_s / self.measured_samples_per_s - 1.0

    @property
    def speedup_error(self) -> float | None:
        """Predicted / measured - 1 of the speedup over the paired serial run: slow changes
        of the machine (other tenants) touch both runs of the pair and cancel."""
        if self.measured_speedup is None or self.predicted_speedup is None:
            return None
        return self.predicted_speedup / self.measured_speedup - 1.0

    @property
    def modelled(self) -> bool:
        """Whether the model claims to describe this run (it does not model
        oversubscription)."""
        return not self.oversubscribed

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workload": self.workload,
            "setting": self.setting,
            "workers": self.workers,
            "per_worker_batch": self.per_worker_batch,
            "global_batch": self.global_batch,
            "oversubscribed": self.oversubscribed,
            "modelled": self.modelled,
            "measured_step_s": self.measured_step_s,
            "predicted_step_s": self.predicted_step_s,
            "step_error": self.step_error,
            "measured_samples_per_s": self.measured_samples_per_s,
            "predicted_samples_per_s": self.predicted_samples_per_s,
            "throughput_error": self.throughput_error,
            "measured_exposed_comm_s": self.measured_exposed_comm_s,
            "predicted_exposed_comm_s": self.predicted_exposed_comm_s,
            "measured_speedup": self.measured_speedup,
            "predicted_speedup": self.predicted_speedup,
            "speedup_error": self.speedup_error,
            "baseline_run": self.baseline_run,
            "calibration_runs": list(self.calibration_runs),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class ValidationReport:
    """Every held-out run, the runs left out and why, and the calibrations used."""

    rows: tuple[ValidationRow, ...]
    skipped: tuple[tuple[str, str], ...]
    """(run id, reason) of measured runs that could not be predicted."""
    calibrations: tuple[Calibration, ...]
    calibration_run_ids: tuple[str, ...]

    def median_abs_error(self, *, modelled_only: bool = False, throughput: bool = False):
        """Median |error| over the held-out runs (None without any)."""
        rows = [r for r in self.rows if r.modelled or not modelled_only]
        if not rows:
            return None
        return stats.median([abs(r.throughput_error if throughput else r.step_error) for r in rows])

    def median_abs_speedup_error(self, *, modelled_only: bool = True) -> float | None:
        """Median |speedup error| over the multi-worker runs with a paired serial run."""
        errors = [
            abs(r.speedup_error)
            for r in self.rows
            if r.speedup_error is not None and (r.modelled or not modelled_only)
        ]
        return stats.median(errors) if errors else None

    def by_setting(self) -> list[dict[str, Any]]:
        """Per setting (workers, pinning, oversubscription): runs and median |error|."""
        groups: dict[str, list[ValidationRow]] = {}
        for row in self.rows:
            groups.setdefault(row.setting, []).append(row)
        return [
            {
                "setting": setting,
                "runs": len(rows),
                "median_abs_step_error": stats.median([abs(r.step_error) for r in rows]),
                "median_step_error": stats.median([r.step_error for r in rows]),
                "median_speedup_error": _median_or_none([r.speedup_error for r in rows]),
                "modelled": all(r.modelled for r in rows),
            }
            for setting, rows in sorted(
                groups.items(), key=lambda item: (item[1][0].workers, item[0])
            )
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [r.to_dict() for r in self.rows],
            "skipped": [{"run_id": run, "reason": why} for run, why in self.skipped],
            "calibration_run_ids": list(self.calibration_run_ids),
            "calibrations": [c.to_dict() for c in self.calibrations],
            "median_abs_step_error": self.median_abs_error(),
            "median_abs_step_error_modelled": self.median_abs_error(modelled_only=True),
            "median_abs_throughput_error": self.median_abs_error(throughput=True),
            "median_abs_throughput_error_modelled": self.median_abs_error(
                modelled_only=True, throughput=True
            ),
            "median_abs_speedup_error_modelled": self.median_abs_speedup_error(),
            "median_abs_speedup_error": self.median_abs_speedup_error(modelled_only=False),
            "target_median_abs_error": TARGET_MEDIAN_ABS_ERROR,
            "by_setting": self.by_setting(),
        }


def setting_label(record: RunRecord) -> str:
    """'2 workers x 1 thread, pinned' and the like; ', oversubscribed' where it was."""
    workers = int(record.world_size or 1)
    threads = record.threads_per_worker
    pinned = bool(record.settings.core_sets)
    _, over = cores_per_worker(record)
    text = f"{workers} worker{'s' if workers > 1 else ''} x {threads} thread"
    text += "s" if threads != 1 else ""
    text += ", pinned" if pinned else ", unpinned"
    if record.settings.threads_per_worker is None and record.settings.oversubscribed:
        text += " (torch default threads)"
    if over:
        text += ", oversubscribed"
    return text


def group_key(record: RunRecord) -> tuple[Any, ...]:
    """What a calibration run and the runs it predicts must share."""
    return (
        record.workload,
        record.data_kind,
        device_kind(record),
        record.machine.hostname,
        device_name(record),
        record.precision or "fp32",
        # A CPU worker's speed is its cores; a GPU worker's is its GPU, whatever host threads
        # feed it.
        cores_per_worker(record)[0] if device_kind(record) == "cpu" else None,
        record.settings.compile,
    )


def default_calibration_runs(records: Sequence[RunRecord]) -> list[RunRecord]:
    """The first (oldest) run of every serial, not oversubscribed configuration."""
    first: dict[tuple[Any, ...], RunRecord] = {}
    for record in sorted(records, key=lambda r: r.created_at):
        if (record.world_size or 1) != 1 or cores_per_worker(record)[1]:
            continue
        if record.settings.grad_accum != 1:
            continue
        setting = (group_key(record), record.config_hash or per_worker_batch(record))
        first.setdefault(setting, record)
    return list(first.values())


def validate_runs(
    records: Iterable[RunRecord],
    layout_for: Callable[[str, float | None], GradientLayout],
    *,
    calibrate_from: Sequence[RunRecord] | None = None,
    cluster: ClusterSpec | None = None,
    link_for: Callable[[RunRecord], LinkSpec | None] | None = None,
    sigma_override: float | None = None,
    sigma_records: Iterable[RunRecord] | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> ValidationReport:
    """Calibrate on some stored runs and predict all the others (see the module doc).

    `layout_for(workload, bucket_cap_mb)` gives a workload's gradient layout; `link_for(run)`
    the measured link of a run's machine (a probe), if any; `cluster` replaces the machine
    of every run (its links and overlap are used, its size widened to the run's workers).
    `sigma_records` are the runs a device's own spread is looked for in (default: `records`).
    """
    measured = [r for r in records if has_step_time(r) and r.workload]
    unknown = {r.run_id: why for r in measured if (why := unmodelled_workload(r)) is not None}
    measured = [r for r in measured if r.run_id not in unknown]
    busy = [r for r in measured if ran_busy(r.summary)]
    measured = [r for r in measured if not ran_busy(r.summary)]
    if calibrate_from is not None:
        calibration_runs = list(calibrate_from)
        for record in calibration_runs:
            check_calibration_run(record, record.workload or "")
    else:
        calibration_runs = default_calibration_runs(measured)
    calibration_ids = {r.run_id for r in calibration_runs}
    by_group: dict[tuple[Any, ...], list[RunRecord]] = {}
    for record in calibration_runs:
        by_group.setdefault(group_key(record), []).append(record)
    sigma_pool = measured if sigma_records is None else list(sigma_records)

    calibrations: dict[tuple[Any, ...], Calibration] = {}
    failures: dict[tuple[Any, ...], str] = {}
    calibration: Calibration | None
    for key, members in by_group.items():
        workload = str(key[0])
        serial = [r for r in members if (r.world_size or 1) == 1]
        if not serial:
            failures[key] = "no serial calibration run for its group"
            continue
        same_device = [
            r for r in sigma_pool if r.machine.hostname == key[3] and device_name(r) == key[4]
        ]
        fallback, note = shared_spread_sigma(workload, same_device)
        try:
            calibration = calibrate_from_runs(
                serial,
                workload,
                sigma_override=sigma_override,
                fallback_sigma=fallback,
                fallback_note=note,
            )
        except CalibrationError as error:
            failures[key] = str(error)
            continue
        for record in serial:
            if ran_busy(record.summary):
                calibration = _with_note(
                    calibration,
                    f"calibration run {record.short_id} ran on a busy machine (other work "
                    f"used its cores): {NOT_TRUSTED}",
                )
        parallel = [r for r in members if (r.world_size or 1) > 1]
        if parallel:
            calibration = _fit_network(calibration, parallel, layout_for, cluster, link_for)
        calibrations[key] = calibration

    rows: list[ValidationRow] = []
    skipped: list[tuple[str, str]] = [
        (r.run_id, BUSY_SKIPPED) for r in busy if r.run_id not in calibration_ids
    ]
    skipped += unknown.items()
    for record in measured:
        if record.run_id in calibration_ids:
            continue
        key = group_key(record)
        calibration = calibrations.get(key)
        if calibration is None:
            reason = failures.get(key) or (
                "no calibration run of the same workload, data, device, precision and "
                "cores per worker"
            )
            skipped.append((record.run_id, reason))
            continue
        row = _predict_run(record, calibration, layout_for, cluster, link_for, samples, seed)
        baseline = _paired_serial(record, measured)
        if baseline is not None and row.workers > 1:
            row = _with_speedup(
                row, record, baseline, calibration, layout_for, cluster, link_for, samples, seed
            )
        rows.append(row)
    rows.sort(key=lambda r: (r.workload, r.workers, r.setting, r.global_batch, r.run_id))
    return ValidationReport(
        rows=tuple(rows),
        skipped=tuple(skipped),
        calibrations=tuple(calibrations.values()),
        calibration_run_ids=tuple(sorted(calibration_ids)),
    )


def unmodelled_workload(record: RunRecord) -> str | None:
    """Why the simulator cannot predict `record`'s workload (a skip reason), or None.

    A custom workload is named by its spec's name, which answers only once its file is
    loaded, and loading it would run the user's code; a registered workload whose package
    has gone is unknown. Either would otherwise fail the whole validation.
    """
    other_framework = unmodelled_framework(record)
    if other_framework:
        return other_framework
    if record.settings.workload_source:
        return f"custom workload {record.workload} (its code is not run to simulate it)"
    if record.settings.script:
        return (
            f"script run {record.workload} (validation takes workloads; "
            f"`trainscale simulate {record.workload}` predicts it)"
        )
    try:
        get_workload(str(record.workload))
    except TrainscaleError:
        return f"workload {record.workload} is not known here (a package no longer installed?)"
    return None


def _with_note(calibration: Calibration, note: str) -> Calibration:
    return replace(calibration, notes=(*calibration.notes, note))


def _cluster_for(
    record: RunRecord,
    cluster: ClusterSpec | None,
    link_for: Callable[[RunRecord], LinkSpec | None] | None,
) -> ClusterSpec:
    workers = int(record.world_size or 1)
    if cluster is not None:
        return replace(cluster, devices_per_node=max(cluster.devices_per_node, workers))
    cores, _ = cores_per_worker(record)
    return local_cluster(
        record.machine,
        device_kind=device_kind(record),
        cores_per_worker=cores,
        intra=link_for(record) if link_for else None,
        min_devices=workers,
    )


def _fit_network(
    calibration: Calibration,
    runs: Sequence[RunRecord],
    layout_for: Callable[[str, float | None], GradientLayout],
    cluster: ClusterSpec | None,
    link_for: Callable[[RunRecord], LinkSpec | None] | None,
) -> Calibration:
    usable = [r for r in runs if not cores_per_worker(r)[1]]
    if not usable:
        return _with_note(
            calibration, "multi-worker calibration runs oversubscribed their cores: not used"
        )
    widest = max(usable, key=lambda r: int(r.world_size or 1))
    machine = _cluster_for(widest, cluster, link_for)
    layout = layout_for(calibration.workload, usable[0].settings.bucket_cap_mb)
    return fit_network(calibration, usable, layout, machine)


def _predict_run(
    record: RunRecord,
    calibration: Calibration,
    layout_for: Callable[[str, float | None], GradientLayout],
    cluster: ClusterSpec | None,
    link_for: Callable[[RunRecord], LinkSpec | None] | None,
    samples: int,
    seed: int,
) -> ValidationRow:
    workers = int(record.world_size or 1)
    batch = per_worker_batch(record)
    machine = _cluster_for(record, cluster, link_for)
    layout = layout_for(str(record.workload), record.settings.bucket_cap_mb)
    predicted = predict_one(
        calibration,
        layout,
        machine,
        workers,
        batch,
        grad_accum=record.settings.grad_accum,
        samples=samples,
        seed=seed,
        check_fit=False,
    )
    _, over = cores_per_worker(record)
    notes = []
    if over:
        notes.append("oversubscribed: more threads than cores, which the model does not model")
    exposed = record.figures.breakdown_s.get("exposed_comm")
    summary = record.summary
    return ValidationRow(
        run_id=record.run_id,
        workload=str(record.workload),
        setting=setting_label(record),
        workers=workers,
        per_worker_batch=batch,
        global_batch=int(record.global_batch_size or batch * workers),
        oversubscribed=over,
        measured_step_s=stored_step_time(summary),
        predicted_step_s=predicted.step_time_s,
        measured_samples_per_s=measured_throughput(record),
        predicted_samples_per_s=predicted.samples_per_s,
        measured_exposed_comm_s=exposed,
        predicted_exposed_comm_s=predicted.exposed_comm_s,
        calibration_runs=calibration.run_ids,
        notes=tuple(notes),
    )


def measured_throughput(record: RunRecord) -> float:
    """A measured run's samples/s: its global batch over its rated step (the one definition,
    `metrics.throughput`: the median step, the mean one where steps do unequal work)."""
    workers = int(record.world_size or 1)
    batch = int(record.global_batch_size or per_worker_batch(record) * workers)
    return throughput(batch, stored_step_time(record.summary))


def _median_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return stats.median(known) if known else None


def _paired_serial(record: RunRecord, measured: Sequence[RunRecord]) -> RunRecord | None:
    """The serial run of the same group and global batch measured nearest in time."""
    if (record.world_size or 1) == 1:
        return None
    key = group_key(record)
    candidates = [
        r
        for r in measured
        if (r.world_size or 1) == 1
        and r.global_batch_size == record.global_batch_size
        and not cores_per_worker(r)[1]
        and group_key(r) == key
    ]
    if not candidates:
        return None

    def distance(other: RunRecord) -> float:
        a = datetime.fromisoformat(record.created_at)
        b = datetime.fromisoformat(other.created_at)
        return abs((a - b).total_seconds())

    return min(candidates, key=distance)


def _with_speedup(
    row: ValidationRow,
    record: RunRecord,
    baseline: RunRecord,
    calibration: Calibration,
    layout_for: Callable[[str, float | None], GradientLayout],
    cluster: ClusterSpec | None,
    link_for: Callable[[RunRecord], LinkSpec | None] | None,
    samples: int,
    seed: int,
) -> ValidationRow:
    machine = _cluster_for(baseline, cluster, link_for)
    layout = layout_for(str(baseline.workload), baseline.settings.bucket_cap_mb)
    serial = predict_one(
        calibration,
        layout,
        machine,
        1,
        per_worker_batch(baseline),
        samples=samples,
        seed=seed,
        check_fit=False,
    )
    measured_serial = measured_throughput(baseline)
    return replace(
        row,
        measured_speedup=row.measured_samples_per_s / measured_serial,
        predicted_speedup=row.predicted_samples_per_s / serial.samples_per_s,
        baseline_run=baseline.run_id,
    )
