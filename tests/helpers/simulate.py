"""Small results stores for the simulator's tests: measured runs and emulations.

A measured run's summary has the keys a real run's summary has (`trainer_output`): the
figures below are set in the summary of one tiny real training run.
"""

from __future__ import annotations

import hashlib
from typing import Any

from trainscale.results.store import RunStore

from tests.helpers.trainer_output import machine_figures, trainer_summary

MACHINE = {
    "hostname": "sim-host",
    "cpu_model": "Test CPU 9000",
    "logical_cores": 2,
    "usable_cores": [0, 1],
    "gpus": [],
    "torch_num_threads_default": 2,
}


def run_id(n: int) -> str:
    return f"run{n:04d}" + "0" * 25


def add_measured_run(
    store: RunStore,
    rid: str,
    *,
    workload: str = "mnist-cnn",
    workers: int = 1,
    batch_size: int = 64,
    step_s: float = 0.1,
    iqr_fraction: float = 0.02,
    breakdown: dict[str, float | None] | None = None,
    threads: int | None = 1,
    pinned: bool = True,
    data: str = "synthetic",
    env: dict[str, Any] | None = None,
    device: str = "cpu",
    precision: str = "fp32",
    tag: str | None = None,
    repeat: int = 0,
    workload_source: str | None = None,
    script: str | None = None,
    mean_step_s: float | None = None,
    flops_per_sample: int = 71_565_312,
    framework: str = "pytorch",
    grad_accum: int = 1,
) -> str:
    """A completed measured run; the breakdown (seconds per phase) is stored as given, in the
    summary of a real run. `workload_source`: a custom workload's reference, as a run of
    one stores it. `mean_step_s`: a run whose steps do unequal work by design (text), rated
    over that mean step as such a run is."""
    assert device == "cpu", "fixture runs are CPU runs: their hardware figures say so"
    machine = dict(env or MACHINE)
    cores = machine["usable_cores"]
    threads_resolved = threads or machine["torch_num_threads_default"]
    core_sets = (
        [cores[w * threads_resolved : (w + 1) * threads_resolved] for w in range(workers)]
        if pinned
        else None
    )
    config = {
        "workload": workload,
        "data": data,
        "device": device,
        "workers": workers,
        "threads_per_worker": threads,
        "affinity": "compact" if pinned else "none",
        "core_sets": core_sets,
        "oversubscribed": workers * threads_resolved > len(cores),
        "batch_size": batch_size,
        "global_batch_size": batch_size * workers,
        "precision": precision,
        "grad_accum": grad_accum,
        "bucket_cap_mb": None,
        "compile": False,
        "framework": framework,
    }
    if workload_source is not None:
        config["workload_source"] = workload_source
    if script is not None:  # a user's own script, run with trainscale.meter()
        config["script"] = script
    config_hash = hashlib.sha256(repr(sorted(config.items())).encode()).hexdigest()[:16]
    store.create_run(
        rid,
        workload,
        config,
        machine,
        data_kind=data,
        world_size=workers,
        threads_per_worker=threads_resolved,
        affinity=config["affinity"],
        precision=precision,
        global_batch_size=batch_size * workers,
        tag=tag,
        config_hash=config_hash,
        repeat_index=repeat,
    )
    facts = [
        {
            "rank": w,
            "cores": core_sets[w] if core_sets else cores,
            "torch_threads": threads_resolved,
            "hostname": machine["hostname"],
        }
        for w in range(workers)
    ]
    rate = batch_size * workers / (mean_step_s or step_s)
    summary = trainer_summary(
        {
            "samples_per_s": rate,
            "samples_per_s_per_worker": rate / workers,
            "step_time_s_median": step_s,
            **(
                {"step_time_s_mean": mean_step_s, "unequal_steps": True}
                if mean_step_s is not None
                else {}
            ),
            "step_time_s_p90": step_s * (1 + iqr_fraction),
            "step_time_s_iqr": step_s * iqr_fraction,
            "num_steps": 35,
            "num_timed_steps": 30,
            "warmup_steps_excluded": 5,
            "num_samples": 35 * batch_size * workers,
            "train_time_s": 35 * step_s,
            "supervised_time_s": 35 * step_s,
            "flops_per_sample": flops_per_sample,
            "workers": facts,
            # Seconds per phase only, as the trainer stores them (exposed_comm as given).
            "breakdown_s": None if breakdown is None else dict(breakdown),
            "breakdown_sampled_steps": 0 if breakdown is None else 6,
            "data_source": "fixture: made-up figures",
            **machine_figures(
                cpu_model=machine["cpu_model"],
                workers=facts,
                samples_per_s=rate,
                flops_per_sample=flops_per_sample,
                interval_s=35 * step_s,
                precision=precision,
            ),
        }
    )
    store.complete_run(rid, summary, [], [step_s] * 35)
    return rid


def add_emulation(
    store: RunStore,
    rid: str,
    *,
    workload: str = "mnist-cnn",
    mode: str = "sync",
    workers: int = 2,
    per_worker_batch: int = 64,
    steps_to_target: int | None = 1000,
    local_steps: int | None = None,
    emulation_id: str = "emu00001",
    target_accuracy: float = 0.99,
) -> str:
    """A completed emulation run following the `summary["emulation"]` contract."""
    global_batch = per_worker_batch if mode == "async" else per_worker_batch * workers
    store.create_run(
        rid,
        workload,
        {"workload": workload, "emulation": {"mode": mode, "workers": workers}},
        MACHINE,
        data_kind="real",
        world_size=1,
        threads_per_worker=2,
        affinity="none",
        precision="fp32",
        global_batch_size=global_batch,
        tag=f"emulate:{emulation_id}",
    )
    summary = {
        "test_accuracy": 0.99,
        "emulation": {
            "mode": mode,
            "workers": workers,
            "global_batch_size": global_batch,
            "per_worker_batch_size": per_worker_batch,
            "local_steps": local_steps,
            "steps_to_target": steps_to_target,
            "samples_to_target": (
                steps_to_target * global_batch if steps_to_target is not None else None
            ),
            "target_accuracy": target_accuracy,
        },
    }
    store.complete_run(rid, summary, [], [])
    return rid


# -- model pieces without a store -------------------------------------------------------------


def calibration(
    *,
    per_sample: float = 1e-3,
    fixed: float = 0.0,
    optimizer: float = 0.005,
    data_per_sample: float = 0.0,
    backward_share: float = 2 / 3,
    sigma: float = 0.0,
    batch: int = 64,
):
    """A hand-made calibration (seconds)."""
    from trainscale.simulator.calibrate import Calibration

    return Calibration(
        workload="mnist-cnn",
        device_kind="cpu",
        device_name="Test CPU 9000",
        precision="fp32",
        source="runs",
        compute_fixed_s=fixed,
        compute_s_per_sample=per_sample,
        backward_share=backward_share,
        optimizer_s=optimizer,
        data_s_per_sample=data_per_sample,
        straggler_sigma=sigma,
        reference_batch_size=batch,
        run_ids=("fixture",),
        cores_per_worker=1,
    )


def cluster(
    *,
    bandwidth: float = 1e9,
    alpha: float = 1e-5,
    devices: int = 8,
    overlap: float = 1.0,
    nodes: int | None = 1,
    inter_bandwidth: float | None = None,
    algorithm: str = "ring",
):
    """A hand-made cluster: `devices` per node, the given links."""
    from trainscale.simulator.cluster import ClusterSpec, DeviceSpec, LinkSpec

    inter = None
    if inter_bandwidth is not None:
        inter = LinkSpec(alpha, inter_bandwidth, "net")
    return ClusterSpec(
        name="fixture",
        devices_per_node=devices,
        device=DeviceSpec(kind="cpu", name="Test CPU 9000", cores=1),
        intra_node=LinkSpec(alpha, bandwidth, "link"),
        inter_node=inter,
        nodes=nodes,
        algorithm=algorithm,
        overlap=overlap,
    )


def tiny_layout(sizes_mib=(2.0, 8.0, 30.0), shares=(0.2, 0.5, 1.0)):
    """A gradient layout of buckets of the given sizes, ready at the given shares."""
    from trainscale.simulator.buckets import MIB, Bucket, GradientLayout

    buckets = tuple(
        Bucket(index=i, num_bytes=int(s * MIB), num_tensors=1, ready_share=r)
        for i, (s, r) in enumerate(zip(sizes_mib, shares, strict=True))
    )
    return GradientLayout(
        buckets=buckets,
        total_bytes=sum(b.num_bytes for b in buckets),
        num_params=sum(b.num_bytes for b in buckets) // 4,
        num_tensors=len(buckets),
        weights_from="parameters",
    )
