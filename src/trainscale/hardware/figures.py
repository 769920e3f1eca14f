"""A run's hardware figures, added to its summary where rank 0 stores it.

- which devices ran it (GPUs, or the CPU cores its workers could use) and their price-table
  kind, so a report can cost it;
- the achieved model FLOP/s and MFU against the theoretical peak of those devices at the
  precisions the run computed in (`hardware.peaks`; on a GPU, an fp32 run's convolutions
  and matrix products may compute in different ones: `hardware.tf32`), with the peak and
  its source;
- `mfu_vs_probe`: the same against the matmul figure `trainscale probe` measured on this
  host and device, when one is stored.

Runs in the worker process that trained (rank 0), so torch's settings and device are the
run's own. A figure that cannot be known is None: never a made-up peak.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from trainscale.hardware.energy import cuda_gpu_ids, energy_sources, load_nvml
from trainscale.hardware.facts import CpuFacts, physical_cores_among, read_cpu_facts
from trainscale.hardware.peaks import (
    Peak,
    achieved_flops_per_s,
    cpu_peak,
    gpu_peak_of_mix,
    match_gpu,
    mfu,
    mix_name,
    rate_of_mix,
)
from trainscale.hardware.tf32 import NO_TF32, Tf32Use, precision_mix, torch_tf32_use
from trainscale.metrics.run_flags import ran_busy


def cores_per_node(workers: Sequence[dict[str, Any]]) -> list[int]:
    """Cores each node's workers could compute on, from the facts every worker reported.

    A worker uses at most its intra-op threads and at most the cores it is pinned to; the
    workers of one node together use at most the union of their cores (the "torch default"
    pitfall runs more threads than that). Workers are grouped by their `hostname` fact when
    they report one, and by the address the other nodes reach them at (`addr`), which tells
    nodes apart where host names do not (containers); workers that report neither are taken
    as one node.
    """
    nodes: dict[Any, list[dict[str, Any]]] = {}
    for fact in workers:
        nodes.setdefault((fact.get("hostname"), fact.get("addr")), []).append(fact)
    counts = []
    for members in nodes.values():
        used = 0
        union: set[int] = set()
        for fact in members:
            cores = fact.get("cores")
            threads = fact.get("torch_threads") or 1
            if isinstance(cores, list) and cores:
                union.update(cores)
                used += min(threads, len(cores))
            else:
                used += threads
        # Hyperthreads of one core share its units: the union counts its physical cores.
        counts.append(min(used, physical_cores_among(union)) if union else used)
    return counts


def gpu_precision_mix(
    gpu_name: str | None,
    precision: str,
    tf32: Tf32Use,
    flops_by_kind: Mapping[str, int] | None = None,
    recurrent_in_fp32: bool = False,
) -> dict[str, float]:
    """The share of a GPU run's FLOPs computed in each precision (`tf32.precision_mix`), on
    the GPU it ran on: TF32 only counts where the GPU has it (a V100 runs fp32 as fp32)."""
    mix = precision_mix(precision, "cuda", tf32, flops_by_kind, recurrent_in_fp32)
    entry = match_gpu(gpu_name)
    if "tf32" in mix and entry is not None and "tf32" not in entry.tflops:
        mix["fp32"] = mix.get("fp32", 0.0) + mix.pop("tf32")
    return mix


def run_peak(
    device_type: str,
    precision: str,
    *,
    gpu_name: str | None = None,
    gpus: int = 1,
    tf32: Tf32Use = NO_TF32,
    flops_by_kind: Mapping[str, int] | None = None,
    recurrent_in_fp32: bool = False,
    cpu_facts: CpuFacts | None = None,
    node_cores: Sequence[int] = (),
) -> Peak | None:
    """The theoretical peak of the devices a run used, at the precisions it computed in (on
    a GPU, an fp32 run's FLOPs by kind of operator, `flops_by_kind`, and the TF32 switches
    it ran under, `tf32`, say which)."""
    if device_type == "cuda":
        mix = gpu_precision_mix(gpu_name, precision, tf32, flops_by_kind, recurrent_in_fp32)
        return gpu_peak_of_mix(gpu_name, mix, gpus)
    if cpu_facts is None or not node_cores:
        return None
    physical = cpu_facts.physical_cores
    # Hyperthreads share their core's units: a node counts at most its physical cores.
    cores = sum(min(n, physical) if physical else n for n in node_cores)
    return cpu_peak(cpu_facts, precision, cores)


def probe_flops_per_s(
    probe_result: dict[str, Any], precision: str, device_type: str, devices: int
) -> float | None:
    """The probe's achievable FLOP/s scaled to the run's devices (None without a figure).

    A CPU probe with T threads gives a per-core rate of best / T, scaled linearly to the
    run's cores (an upper bound: memory bandwidth is shared); a GPU probe is per GPU.
    """
    figures = (probe_result.get("precisions") or {}).get(precision)
    if not figures or not figures.get("best_flops_per_s"):
        return None
    best = float(figures["best_flops_per_s"])
    if device_type == "cpu":
        threads = probe_result.get("threads") or 1
        return best / threads * devices
    return best * devices


def latest_full_probe(
    store: Any,
    host: str,
    device: str,
    device_type: str,
    precisions: Sequence[str] = (),
) -> Any | None:
    """The newest matmul probe of this host and device that was not a --quick one; with
    `precisions`, the newest that measured them all, on a machine that was not busy (the
    yardstick a run's MFU is taken against: a probe of other precisions, or one that shared
    its cores with other work, says nothing of what this run could reach)."""
    for probe in store.list_probes(
        kind="matmul", host=host, device=device, device_type=device_type
    ):
        if probe.result.get("quick"):
            continue
        if not precisions:
            return probe
        if ran_busy(probe.result):
            continue
        if all(probe_flops_per_s(probe.result, p, device_type, 1) for p in precisions):
            return probe
    return None


def cuda_device() -> str:
    """This worker's GPU name."""
    import torch

    return torch.cuda.get_device_name(torch.cuda.current_device())


@dataclass(frozen=True)
class Devices:
    """The devices a run computed on, as a price table names them."""

    device_type: str
    """'cpu' or 'cuda'."""
    device: str
    """The GPU's name, or the CPU model."""
    devices: int
    """GPUs over every node, or the CPU cores the workers could compute on."""
    kind: str | None
    """The price table's kind ('cpu-core', a GPU kind), None for a GPU the table lacks."""


@dataclass(frozen=True)
class HardwareFigures:
    """What a run's hardware did: its devices, achieved FLOP/s and MFU (docs/hardware.md).

    A figure that cannot be known is None: never a made-up peak.
    """

    hardware: Devices | None = None
    achieved_tflops: float | None = None
    """Model TFLOP/s achieved: FLOPs per sample x samples per second."""
    mfu_peak: dict[str, Any] | None = None
    """The theoretical peak MFU is measured against, with its source (`Peak.to_dict`)."""
    mfu: float | None = None
    """Achieved over the theoretical peak of the run's devices at its precision."""
    mfu_vs_probe: float | None = None
    """Achieved over what `trainscale probe` measured on this host and device."""
    mfu_probe_peak: dict[str, Any] | None = None
    """That probe's figure, scaled to the run's devices, and which probe it was."""
    hardware_error: str | None = None
    """Why the figures could not be computed (the run is stored all the same)."""

    def summary(self) -> dict[str, Any]:
        """The keys these figures take in a stored run summary."""
        if self.hardware_error is not None:
            return {"mfu": None, "hardware_error": self.hardware_error}
        figures = asdict(self)
        del figures["hardware_error"]
        return figures


@dataclass(frozen=True)
class RunDevices:
    """What a run's hardware figures depend on of its configuration."""

    device_type: str
    """'cpu' or 'cuda'."""
    world_size: int
    """Workers over all nodes: one GPU each on CUDA."""
    precision: str
    """The precision it computed in, which picks the peak ('fp32', 'bf16', ...; one the
    peak table does not know gets no peak)."""
    gpu_tf32: Callable[[], Tf32Use] = torch_tf32_use
    """Which kinds of operator its framework computes fp32 in TF32 on a GPU (this
    process's torch switches for PyTorch), read when the figures are made."""
    recurrent_in_fp32: bool = False
    """Whether its model keeps its recurrent layers in fp32 under a bf16 autocast on a GPU
    (`Workload.recurrent`)."""


def hardware_figures(
    devices: RunDevices,
    throughput: Mapping[str, Any],
    workers: Sequence[dict[str, Any]],
    store: Any | None = None,
    cpu_facts: CpuFacts | None = None,
) -> HardwareFigures:
    """A run's hardware figures (see the module docstring), from what it ran on
    (`devices`), its `flops_per_sample` and global `samples_per_s` (in `throughput`) and
    its workers' facts (and its `flops_per_sample_by_kind`, which on a GPU says which
    FLOPs computed in TF32).

    A CPU run is rated on this machine's CPU, or on `cpu_facts` when given.
    """
    device_type = devices.device_type
    if device_type == "cuda":
        gpu_name = cuda_device()
        mix = gpu_precision_mix(
            gpu_name,
            devices.precision,
            devices.gpu_tf32(),
            throughput.get("flops_per_sample_by_kind"),
            devices.recurrent_in_fp32,
        )
        # One GPU per worker on every node: throughput is global, so the peak must be too.
        count = devices.world_size
        entry = match_gpu(gpu_name)
        kind = entry.kind if entry else None
        device_name = gpu_name
        peak = gpu_peak_of_mix(gpu_name, mix, count)
    else:
        facts = cpu_facts or read_cpu_facts()
        node_cores = cores_per_node(workers)
        count = sum(node_cores)
        kind = "cpu-core"
        device_name = facts.model_name or "cpu"
        mix = {devices.precision: 1.0}
        peak = run_peak(device_type, devices.precision, cpu_facts=facts, node_cores=node_cores)
    achieved = achieved_flops_per_s(
        throughput.get("flops_per_sample"), throughput.get("samples_per_s")
    )
    against_probe: dict[str, Any] = {}
    if store is not None and achieved is not None and mix:
        host = socket.gethostname()
        probe = latest_full_probe(store, host, device_name, device_type, tuple(mix))
        if probe is not None:
            reachable = rate_of_mix(
                mix, lambda p: probe_flops_per_s(probe.result, p, device_type, count)
            )
            if reachable:
                against_probe = {
                    "mfu_vs_probe": achieved / reachable,
                    "mfu_probe_peak": {
                        "tflops": reachable / 1e12,
                        "precision": mix_name(mix),
                        "probe_id": probe.probe_id,
                        "measured_at": probe.created_at,
                    },
                }
    return HardwareFigures(
        hardware=Devices(device_type, device_name, count, kind),
        achieved_tflops=None if achieved is None else achieved / 1e12,
        mfu_peak=None if peak is None else peak.to_dict(),
        mfu=mfu(achieved, None if peak is None else peak.flops_per_s),
        **against_probe,
    )


def hardware_figures_safe(
    devices: RunDevices,
    throughput: Mapping[str, Any],
    workers: Sequence[dict[str, Any]],
    store: Any | None = None,
) -> HardwareFigures:
    """`hardware_figures`, but a failure is recorded instead of raised: a run that trained
    must be stored even if, say, the probe lookup fails."""
    try:
        return hardware_figures(devices, throughput, workers, store)
    except Exception as error:
        return HardwareFigures(hardware_error=f"{type(error).__name__}: {error}")


def machine_peaks(env: dict[str, Any], facts: CpuFacts | None = None) -> dict[str, Any]:
    """This machine's entries of the peak table, for `trainscale env`.

    The CPU peak is over the usable cores (at most the physical ones), in fp32 and bf16;
    each GPU gets its table entry, or None when the table does not know it.
    """
    facts = facts or read_cpu_facts()
    listed = env.get("usable_cores") or []
    usable = physical_cores_among(listed) if listed else (facts.logical_cores or 1)
    cores = min(usable, facts.physical_cores) if facts.physical_cores else usable
    cpu = {}
    for precision in ("fp32", "bf16"):
        peak = cpu_peak(facts, precision, cores)
        cpu[precision] = None if peak is None else peak.to_dict()
    gpus = []
    for gpu in env.get("gpus") or []:
        entry = match_gpu(gpu.get("name"))
        gpus.append(
            {
                "index": gpu.get("index"),
                "name": gpu.get("name"),
                "table_device": entry.name if entry else None,
                "tflops": dict(entry.tflops) if entry else None,
                "source": entry.source if entry else None,
            }
        )
    return {"cpu": cpu, "gpus": gpus}


def machine_energy_sources(env: dict[str, Any]) -> dict[str, str]:
    """Whether RAPL and NVML energy can be read here (for `trainscale env`)."""
    gpus = env.get("gpus") or []
    ids = cuda_gpu_ids(len(gpus)) if gpus else []
    return energy_sources(nvml=load_nvml() if gpus else None, gpus=ids)
