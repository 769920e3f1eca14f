"""From the command line's words to a cluster, a calibration and a gradient layout.

Shared by `trainscale simulate` and `trainscale predict-time-to-accuracy`: which cluster
(file, preset or the machine at hand, with a stored probe's link), which stored runs
calibrate the workload on its device (given, or found), and the model's buckets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from trainscale.errors import ConfigError
from trainscale.hardware import facts
from trainscale.metrics.run_flags import NOT_TRUSTED, ran_busy
from trainscale.metrics.throughput import stored_step_time
from trainscale.results.records import RunRecord
from trainscale.results.store import RunStore
from trainscale.results.stored_machine import StoredMachine
from trainscale.simulator.buckets import GradientLayout, workload_layout
from trainscale.simulator.calibrate import (
    Calibration,
    CalibrationError,
    calibrate_from_peak,
    calibrate_from_runs,
    check_calibration_run,
    fit_effective_link,
    matching_serial_runs,
    probe_link,
    shared_spread_sigma,
    training_flops_per_sample,
)
from trainscale.simulator.cluster import LOCAL, ClusterSpec, local_cluster, resolve_cluster_argument
from trainscale.simulator.cross_workload import calibrate_from_other_workloads
from trainscale.simulator.predict import predict_one
from trainscale.simulator.probed_device import with_probed_costs
from trainscale.simulator.run_facts import (
    cores_per_worker,
    device_kind,
    is_measured,
    per_worker_batch,
)
from trainscale.workloads import get_workload, is_builtin
from trainscale.workloads.custom import file_version

BUSY_WHY = "other work used their cores"
"""Why a busy run says nothing of the setting alone (the busy rule, `metrics.run_flags`)."""


@dataclass(frozen=True)
class Setup:
    """Everything a prediction needs."""

    workload: str
    cluster: ClusterSpec
    calibration: Calibration
    layout: GradientLayout


def cached_layout(
    workload: str, bucket_cap_mb: float | None, device: str = "cpu"
) -> GradientLayout:
    """A workload's gradient layout, built once per process (it builds and runs the model)
    and per version of a custom workload's file (an edited file is built again, as
    `get_workload` loads it again), its operators counted on `device`."""
    return _layout(workload, bucket_cap_mb, device, file_version(workload))


@lru_cache(maxsize=32)
def _layout(
    workload: str, bucket_cap_mb: float | None, device: str, version: tuple[int, int] | None
) -> GradientLayout:
    return workload_layout(workload, bucket_cap_mb, device)


def counting_device(cluster: ClusterSpec) -> str:
    """Where to count a workload's operators for `cluster`: on its device kind where this
    machine has one (a GPU machine counts cuDNN's operators), else on the CPU."""
    return "cuda" if cluster.device.kind == "cuda" and torch.cuda.is_available() else "cpu"


def default_workers(cluster: ClusterSpec) -> list[int]:
    """Powers of two up to the cluster's devices (up to 8 nodes' worth for an open cluster)."""
    limit = cluster.max_devices or cluster.devices_per_node * 8
    limit = min(max(limit, 1), 1024)
    counts, n = [], 1
    while n <= limit:
        counts.append(n)
        n *= 2
    return counts


def load_runs(store: RunStore | None, run_ids: Sequence[str]) -> list[RunRecord]:
    """The runs named on the command line (ids or unique prefixes)."""
    if not run_ids:
        return []
    if store is None:
        raise ConfigError("--calibrate-from needs a results store, and there is none")
    return [store.get_run(run_id) for run_id in run_ids]


def load_given_runs(
    store: RunStore | None, run_ids: Sequence[str], name: str, cluster: ClusterSpec
) -> list[RunRecord]:
    """The runs `--calibrate-from` names, each checked to be a completed run of `name` on
    the device of `cluster` (CalibrationError otherwise)."""
    given = load_runs(store, run_ids)
    for record in given:
        check_calibration_run(record, name)
        if device_kind(record) != cluster.device.kind:
            raise CalibrationError(
                f"calibration run {record.short_id} ran on {device_kind(record)}, but the "
                f"devices of cluster {cluster.name!r} are {cluster.device.kind}"
            )
    return given


def open_store(path: Path, *, required: bool) -> RunStore | None:
    """The results store, or None when it does not exist and is not required."""
    if not path.exists() and not required:
        return None
    return RunStore(path, create=False, fail_stale=True)


def resolve_cluster(
    value: str,
    store: RunStore | None,
    *,
    device: str | None = None,
    threads_per_worker: int | None = None,
    workload: str | None = None,
    env: dict[str, Any] | None = None,
    nodes: int | None = None,
) -> ClusterSpec:
    """A preset, a file, or 'local': this machine, with its stored probes' figures if any
    (the all-reduce as its link; the matmul rate and per-operator overhead for a workload
    with no run on the device).

    On a CPU, a local worker computes on `threads_per_worker` cores; without it, on as many
    as the newest stored serial run of `workload` on this machine did (else 1), so that
    the runs the user made calibrate the prediction. `nodes` sets the cluster's node count
    (a preset of one node type grows to 16 nodes and beyond).
    """
    cluster = resolve_cluster_argument(value)
    if cluster is not None:
        # A preset or file states its device and cores: these describe this machine only.
        given = [
            flag
            for flag, value_given in (
                ("--device", device),
                ("--threads-per-worker", threads_per_worker),
            )
            if value_given is not None
        ]
        if given:
            verb = "apply" if len(given) > 1 else "applies"
            raise ConfigError(
                f"{' and '.join(given)} {verb} to --cluster local (this machine); cluster "
                f"{cluster.name!r} states its own device and cores"
            )
        return with_nodes(cluster, nodes)
    machine = StoredMachine.of(facts.collect_environment() if env is None else env)
    host = machine.hostname
    kind = device or ("cuda" if machine.gpu_names else "cpu")
    cores = machine.cores
    if kind == "cpu" and threads_per_worker is not None and cores and threads_per_worker > cores:
        # A device of more cores than the machine has: a prediction for no run it can make.
        raise ConfigError(
            f"--threads-per-worker {threads_per_worker} exceeds the {cores} usable core(s) of "
            "this machine (--cluster local); give at most that, or a cluster file for a larger "
            "machine"
        )
    if threads_per_worker is None:
        threads_per_worker = _stored_cores(store, workload, host) or 1
    link = probe_link(store, host, kind) if store is not None else None
    local = local_cluster(
        machine, device_kind=kind, cores_per_worker=threads_per_worker, intra=link
    )
    if store is not None:
        local = replace(local, device=with_probed_costs(local.device, store, host))
    return with_nodes(local, nodes)


def with_nodes(cluster: ClusterSpec, nodes: int | None) -> ClusterSpec:
    """`cluster` with `nodes` nodes (None: as it is); ConfigError for a cluster without an
    inter-node link, which has one node only."""
    if nodes is None:
        return cluster
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ConfigError(f"--nodes must be a whole number >= 1, got {nodes!r}")
    if nodes > 1 and cluster.inter_node is None:
        raise ConfigError(
            f"cluster {cluster.name!r} has no inter-node link, so one node only; --nodes "
            f"{nodes} needs a cluster file with an [inter_node] section"
        )
    return replace(cluster, nodes=nodes)


def _stored_cores(store: RunStore | None, workload: str | None, host: str | None) -> int | None:
    if store is None or workload is None:
        return None
    for record in store.list_runs(workload=workload, status="completed"):
        if (
            (record.world_size or 1) == 1
            and record.machine.hostname == host
            and device_kind(record) == "cpu"
            and is_measured(record)
            and not cores_per_worker(record)[1]
        ):
            return cores_per_worker(record)[0]
    return None


def calibrate(
    workload: str,
    cluster: ClusterSpec,
    store: RunStore | None,
    *,
    run_ids: Sequence[str] = (),
    precision: str = "fp32",
    bucket_cap_mb: float | None = None,
    sigma_override: float | None = None,
) -> Setup:
    """Calibrate `workload` for `cluster`'s device from the given or the matching runs."""
    if precision == "auto":  # auto picks for this machine's run, not for a simulated device
        raise ConfigError(
            "--precision auto chooses for a run on this machine; name the precision to "
            "simulate (fp32 or bf16)"
        )
    get_workload(workload)  # an unknown name fails here, with the list of names
    given = load_given_runs(store, run_ids, workload, cluster)
    counted_on = counting_device(cluster)
    layout = cached_layout(workload, bucket_cap_mb, counted_on)
    all_runs = store.list_runs(workload=workload, status="completed") if store else []
    device_runs = (
        [r for r in store.list_runs(status="completed") if cluster.device.matches(r.machine)]
        if store is not None
        else []
    )
    fallback, note = shared_spread_sigma(workload, device_runs)
    if given:
        serial = [r for r in given if (r.world_size or 1) == 1]
        calibration = calibrate_from_runs(
            serial,
            workload,
            sigma_override=sigma_override,
            fallback_sigma=fallback,
            fallback_note=note,
        )
        parallel = [r for r in given if (r.world_size or 1) > 1]
        if parallel:
            calibration = fit_network(calibration, parallel, layout, cluster)
    else:
        cores = cluster.device.cores if cluster.device.kind == "cpu" else None
        found = matching_serial_runs(all_runs, workload, cluster.device, precision, cores=cores)
        # As validation does: a run that shared its cores measured the other work too.
        quiet = [r for r in found if not ran_busy(r.summary)]
        busy_note = None
        if quiet and len(quiet) < len(found):
            busy_note = f"{len(found) - len(quiet)} busy run(s) left out ({BUSY_WHY})"
        elif found and not quiet:
            busy_note = f"every calibration run ran on a busy machine ({BUSY_WHY}): {NOT_TRUSTED}"
        found = quiet or found
        if found:
            kind = found[0].data_kind
            same = [r for r in found if r.data_kind == kind]
            calibration = calibrate_from_runs(
                same,
                workload,
                sigma_override=sigma_override,
                fallback_sigma=fallback,
                fallback_note=note,
            )
            if len(same) < len(found):
                calibration = _note(
                    calibration,
                    f"calibrated on {kind} data; {len(found) - len(same)} run(s) on other "
                    "data left out",
                )
            if busy_note:
                calibration = _note(calibration, busy_note)
        else:
            hint = other_precisions_hint(all_runs, workload, cluster, precision, cores)
            flops = training_flops_per_sample(workload, all_runs, layout.flops_per_sample)
            calibration = calibrate_from_other_workloads(
                workload,
                device_runs,
                cluster.device,
                precision,
                ops_per_step=layout.ops_per_step,
                flops_per_sample=flops,
                reference_batch_size=get_workload(workload).recipe.batch_size,
                ops_of=lambda name: _builtin_ops(name, counted_on),
                sigma_override=sigma_override,
            ) or _from_peak(workload, cluster, precision, flops, layout, sigma_override, hint)
            if hint:
                calibration = _note(calibration, hint)
    if calibration.precision != precision and given:
        calibration = _note(calibration, f"calibration runs are {calibration.precision}")
    return Setup(workload=workload, cluster=cluster, calibration=calibration, layout=layout)


def _builtin_ops(workload: str, device: str) -> int | None:
    """Operators of one forward + backward of a built-in workload on `device` (a user's
    workload may not build here)."""
    return cached_layout(workload, None, device).ops_per_step if is_builtin(workload) else None


def other_precisions_hint(
    records: Sequence[RunRecord],
    workload: str,
    cluster: ClusterSpec,
    precision: str,
    cores: int | None,
) -> str | None:
    """What to ask instead, where `workload` has no serial run on the cluster's device at
    `precision` but has some at another (a run's `--precision auto` picks bf16 where the
    hardware has it, the simulator fp32 unless told): None when it has none."""
    device = cluster.device
    others = [
        other
        for other in ("fp32", "bf16", "fp16")
        if other != precision
        and matching_serial_runs(records, workload, device, other, cores=cores)
    ]
    if not others:
        return None
    asks = " or ".join(f"--precision {other}" for other in others)
    return (
        f"{workload} has serial runs on {device.name} in {' and '.join(others)}, not in "
        f"{precision}: {asks} calibrates from them"
    )


def _from_peak(
    workload: str,
    cluster: ClusterSpec,
    precision: str,
    flops: float,
    layout: GradientLayout,
    sigma_override: float | None,
    hint: str | None = None,
) -> Calibration:
    """Compute from the device's peak and per-operator overhead: a cluster file's, or for
    the machine at hand its probes' (`probed_device`); a failure names `hint`, the runs
    at another precision, first."""
    try:
        return calibrate_from_peak(
            workload,
            cluster.device,
            precision,
            flops,
            layout.num_params,
            reference_batch_size=get_workload(workload).recipe.batch_size,
            ops_per_step=layout.ops_per_step,
            sigma_override=sigma_override,
            flops_by_kind=layout.flops_by_kind,
        )
    except CalibrationError as error:
        if hint is not None:
            raise CalibrationError(f"{error}; but {hint}") from None
        if cluster.origin != LOCAL:
            raise
        raise CalibrationError(
            f"{error}; or measure this machine's peak with `trainscale probe` (on a quiet machine)"
        ) from None


def _note(calibration: Calibration, note: str) -> Calibration:
    return replace(calibration, notes=(*calibration.notes, note))


def fit_network(
    calibration: Calibration,
    runs: Sequence[RunRecord],
    layout: GradientLayout,
    cluster: ClusterSpec,
) -> Calibration:
    """The calibration with an effective intra-node link fitted to multi-worker runs."""
    usable = [r for r in runs if not cores_per_worker(r)[1]]
    if not usable:
        raise CalibrationError(
            "the multi-worker calibration runs oversubscribed their cores; the model does "
            "not describe such runs, so they cannot calibrate the network"
        )
    if cluster.inter_node is not None and cluster.devices_per_node < max(
        int(r.world_size or 1) for r in usable
    ):
        raise CalibrationError(
            "multi-worker calibration runs fit the intra-node link; they used more workers "
            f"than a node of cluster {cluster.name!r} holds"
        )

    def predict_step(link, workers: int, batch: int) -> float:
        trial = replace(calibration, network=link)
        return predict_one(trial, layout, cluster, workers, batch, samples=400).step_time_s

    points = [
        (int(r.world_size or 1), per_worker_batch(r), stored_step_time(r.summary)) for r in usable
    ]
    link = fit_effective_link(points, predict_step, cluster.intra_node)
    return replace(
        calibration,
        network=link,
        run_ids=(*calibration.run_ids, *(r.run_id for r in usable)),
    )
