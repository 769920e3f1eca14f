"""Cluster specs: devices per node, device compute, the intra-node link and the network.

A cluster comes from a TOML file (its format, and the models that validate it, are in
`cluster_file.py`), a shipped preset (`simulator/presets/*.toml`), or `local`, the machine at
hand. Mistakes raise `ClusterError`: one line that names the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from trainscale.config.files import load_toml, parse_toml, validate
from trainscale.config.suggest import did_you_mean
from trainscale.results.stored_machine import StoredMachine
from trainscale.simulator.cluster_file import ClusterError, ClusterFile, LinkSection
from trainscale.simulator.collectives import Link, Topology

LOCAL = "local"
"""The name of the generated cluster that describes the machine at hand."""

DEFAULT_LOOPBACK_ALPHA_S = 50e-6
DEFAULT_LOOPBACK_BANDWIDTH = 1e9
"""gloo over loopback TCP between processes of one machine, when no probe measured it:
conservative figures (a quiet machine does better; a busy one worse). `trainscale probe`
replaces them with measured ones."""
DEFAULT_PCIE_ALPHA_S = 10e-6
DEFAULT_PCIE_BANDWIDTH = 10e9
"""GPUs of one machine without a probe: PCIe 3.0 x16 as NCCL typically reaches it."""


@dataclass(frozen=True)
class DeviceSpec:
    """One device: a GPU, or a CPU worker process with its cores."""

    kind: str
    """'cpu' or 'cuda'."""
    name: str
    match: tuple[str, ...] = ()
    """Names (case-insensitive substrings of a run's CPU model or GPU name, or its host)
    that say a stored run measured this device; empty = the device name itself."""
    peak_flops: dict[str, float] = field(default_factory=dict)
    """Dense peak FLOP/s per precision ('*' = any precision)."""
    efficiency: float | None = None
    """Share of the peak that training reaches, used when no stored run measured the device."""
    memory_bandwidth: float | None = None
    """Bytes/s; the optimizer step is memory-bound and is costed from it without a run."""
    op_overhead_s: float | None = None
    """Fixed cost of one dispatched operator (eager dispatch, kernel launch), used without a
    run: the part of a step that does not shrink with the batch."""
    cores: int | None = None
    """CPU cores of one worker (CPU devices only)."""
    straggler_sigma: float | None = None
    """Lognormal sigma of a worker's compute time, when no run measured its spread."""
    source: str = ""

    def peak_for(self, precision: str) -> float | None:
        """The peak FLOP/s at `precision`, or None if the spec does not give one."""
        return self.peak_flops.get(precision, self.peak_flops.get("*"))

    def matches(self, machine: StoredMachine) -> bool:
        """Whether a stored run's machine is this device (by name)."""
        haystack = " | ".join(machine.names).lower()
        needles = self.match or (self.name,)
        return any(needle.lower() in haystack for needle in needles if needle)


@dataclass(frozen=True)
class LinkSpec:
    """A link as the file gives it."""

    alpha_s: float
    bandwidth_bytes_per_s: float
    name: str = ""
    source: str = ""

    @property
    def link(self) -> Link:
        return Link.from_bandwidth(self.alpha_s, self.bandwidth_bytes_per_s)


@dataclass(frozen=True)
class ClusterSpec:
    """A validated cluster."""

    name: str
    devices_per_node: int
    device: DeviceSpec
    intra_node: LinkSpec
    inter_node: LinkSpec | None = None
    nodes: int | None = None
    """At most this many nodes; None = as many as a prediction asks for."""
    algorithm: str = "ring"
    overlap: float = 1.0
    """Share of gradient communication that can run beside backward compute: 1 for GPUs
    (NCCL on its own stream), 0 for CPU workers whose cores are all busy computing (gloo's
    threads then take their time from the compute)."""
    servers: int = 1
    server_bandwidth: float | None = None
    description: str = ""
    source: str = ""
    origin: str = ""
    """Where it came from: a file path, 'preset:NAME' or 'local'."""

    @property
    def max_devices(self) -> int | None:
        """Devices in the whole cluster, None when the node count is open."""
        return None if self.nodes is None else self.nodes * self.devices_per_node

    def topology(self) -> Topology:
        """The links the collectives are costed on."""
        inter = self.inter_node.link if self.inter_node else None
        server = None
        if self.server_bandwidth is not None:
            alpha = (self.inter_node or self.intra_node).alpha_s
            server = Link.from_bandwidth(alpha, self.server_bandwidth)
        return Topology(
            devices_per_node=self.devices_per_node,
            intra=self.intra_node.link,
            inter=inter,
            server=server,
            servers=self.servers,
        )

    def _fewer_cores(self) -> str:
        """How the machine at hand holds more CPU workers: fewer cores each (its device is a
        worker on the cores the newest serial run used, or --threads-per-worker)."""
        cores = self.device.cores
        if self.origin != LOCAL or self.device.kind != "cpu" or not cores or cores < 2:
            return ""
        return (
            f"; a device here is a worker on {cores} cores: --threads-per-worker 1 makes "
            f"{self.devices_per_node * cores} of them (calibrated from serial runs on 1 core)"
        )

    def check_workers(self, workers: int) -> None:
        """ClusterError unless `workers` devices fit in this cluster."""
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ClusterError(f"workers must be whole numbers >= 1, got {workers!r}")
        limit = self.max_devices
        if limit is not None and workers > limit:
            raise ClusterError(
                f"cluster {self.name!r} has {limit} devices ({self.nodes} node(s) x "
                f"{self.devices_per_node}); {workers} workers do not fit{self._fewer_cores()}"
            )
        if self.inter_node is None and workers > self.devices_per_node:
            raise ClusterError(
                f"cluster {self.name!r} is one node of {self.devices_per_node} devices and "
                f"has no [inter_node] network; {workers} workers do not fit"
            )

    def describe(self) -> dict[str, Any]:
        """The cluster as JSON-ready facts, for --json output."""

        def link(spec: LinkSpec | None) -> dict[str, Any] | None:
            if spec is None:
                return None
            return {
                "name": spec.name,
                "alpha_s": spec.alpha_s,
                "bandwidth_bytes_per_s": spec.bandwidth_bytes_per_s,
                "source": spec.source,
            }

        return {
            "name": self.name,
            "origin": self.origin,
            "description": self.description,
            "source": self.source,
            "nodes": self.nodes,
            "devices_per_node": self.devices_per_node,
            "device": {
                "kind": self.device.kind,
                "name": self.device.name,
                "peak_flops": self.device.peak_flops,
                "efficiency": self.device.efficiency,
                "memory_bandwidth_bytes_per_s": self.device.memory_bandwidth,
                "op_overhead_s": self.device.op_overhead_s,
                "cores": self.device.cores,
                "straggler_sigma": self.device.straggler_sigma,
                "source": self.device.source,
            },
            "intra_node": link(self.intra_node),
            "inter_node": link(self.inter_node),
            "algorithm": self.algorithm,
            "overlap": self.overlap,
            "servers": self.servers,
            "server_bandwidth_bytes_per_s": self.server_bandwidth,
        }


# -- reading ---------------------------------------------------------------------------------


def parse_cluster(data: dict[str, Any], where: str, default_name: str = "cluster") -> ClusterSpec:
    """Validate a cluster table (as read from TOML); ClusterError names `where` and the key."""
    return _spec_of(validate(data, ClusterFile, f"cluster {where}"), where, default_name)


def load_cluster_file(path: Path) -> ClusterSpec:
    """Read and validate a cluster TOML file."""
    return _spec_of(load_toml(path, ClusterFile), str(path), default_name=path.stem)


def _spec_of(file: ClusterFile, origin: str, default_name: str) -> ClusterSpec:
    """The cluster a validated file describes."""
    device = file.device
    comm = file.communication
    return ClusterSpec(
        name=file.name or default_name,
        devices_per_node=file.devices_per_node,
        device=DeviceSpec(
            kind=device.kind,
            name=device.name if device.name is not None else device.kind,
            match=tuple(device.match),
            peak_flops={key: flops for key, flops in device.peak_flops.items()},
            efficiency=device.efficiency,
            memory_bandwidth=device.memory_bandwidth,
            op_overhead_s=device.op_overhead,
            cores=device.cores,
            straggler_sigma=device.straggler_sigma,
            source=device.source,
        ),
        intra_node=_link_of(file.intra_node),
        inter_node=_link_of(file.inter_node) if file.inter_node is not None else None,
        nodes=file.nodes,
        algorithm=comm.algorithm,
        overlap=comm.overlap,
        servers=comm.servers,
        server_bandwidth=comm.server_bandwidth,
        description=file.description,
        source=file.source,
        origin=origin,
    )


def _link_of(section: LinkSection) -> LinkSpec:
    return LinkSpec(
        alpha_s=section.alpha,
        bandwidth_bytes_per_s=section.bandwidth,
        name=section.name,
        source=section.source,
    )


# -- presets ---------------------------------------------------------------------------------


def preset_names() -> list[str]:
    """The shipped presets (`simulator/presets/*.toml`), sorted, plus 'local'."""
    folder = resources.files("trainscale.simulator") / "presets"
    names = [p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml")]
    return sorted(names) + [LOCAL]


def load_preset(name: str) -> ClusterSpec:
    """A shipped preset by name ('local' is generated: see `local_cluster`)."""
    folder = resources.files("trainscale.simulator") / "presets"
    resource = folder / f"{name}.toml"
    if not resource.is_file():
        names = preset_names()
        raise ClusterError(
            f"unknown cluster preset {name!r}{did_you_mean(name, names)}; "
            f"presets: {', '.join(names)}"
        )
    data = parse_toml(resource.read_text(encoding="utf-8"), f"preset {name}", ClusterError)
    return parse_cluster(data, f"preset:{name}", default_name=name)


def resolve_cluster_argument(value: str) -> ClusterSpec | None:
    """A cluster file path or preset name; None for 'local' (built by the caller, who knows
    the calibration and the store). ClusterError for anything else."""
    if value == LOCAL:
        return None
    path = Path(value).expanduser()
    if path.suffix == ".toml" or path.exists() or "/" in value:
        if not path.is_file():
            raise ClusterError(f"no cluster file {value}")
        return load_cluster_file(path)
    return load_preset(value)


def local_cluster(
    machine: StoredMachine,
    *,
    device_kind: str = "cpu",
    cores_per_worker: int = 1,
    intra: LinkSpec | None = None,
    min_devices: int = 1,
) -> ClusterSpec:
    """The machine at hand (`StoredMachine.of(collect_environment())`) or a stored run's
    machine as a one-node cluster.

    On a CPU a device is a worker process pinned to `cores_per_worker` cores, so the node
    holds usable cores // cores_per_worker of them; the link between them is gloo over
    loopback, from a probe (`intra`) or else conservative defaults. gloo's threads run on
    the workers' own cores, so communication does not overlap compute (overlap 0). On a
    GPU machine a device is a GPU and the link, without a probe, PCIe.
    `min_devices` widens the node (for validating a stored run that used more workers than
    the machine had devices: the prediction then says it does not model oversubscription).
    """
    host = machine.hostname or "this machine"
    if device_kind == "cuda":
        name = machine.gpu_name or "GPU"
        count = max(len(machine.gpu_names), min_devices, 1)
        link = intra or LinkSpec(
            DEFAULT_PCIE_ALPHA_S,
            DEFAULT_PCIE_BANDWIDTH,
            "PCIe (default)",
            "default: PCIe 3.0 x16 as NCCL typically reaches it; `trainscale probe` measures it",
        )
        device = DeviceSpec(kind="cuda", name=name, match=(name,), source=f"GPUs of {host}")
        overlap = 1.0
    else:
        cores = machine.cores
        count = max((cores or 1) // max(1, cores_per_worker), min_devices, 1)
        link = intra or LinkSpec(
            DEFAULT_LOOPBACK_ALPHA_S,
            DEFAULT_LOOPBACK_BANDWIDTH,
            "loopback (default)",
            "default: conservative figures for gloo over loopback TCP; `trainscale probe` "
            "measures them",
        )
        name = machine.cpu_model or "cpu"
        device = DeviceSpec(
            kind="cpu",
            name=name,
            match=(host,) if machine.hostname else (name,),
            cores=cores_per_worker,
            source=f"CPU cores of {host}",
        )
        overlap = 0.0
    return ClusterSpec(
        name=LOCAL,
        devices_per_node=count,
        device=device,
        intra_node=link,
        inter_node=None,
        nodes=1,
        algorithm="ring",
        overlap=overlap,
        description=f"{host}: {count} {device_kind} device(s)",
        source="generated from the machine's environment"
        + (" and a stored probe" if intra is not None else ""),
        origin=LOCAL,
    )
