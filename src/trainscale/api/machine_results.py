"""The API's typed results about the machine rather than a run: what `env()` reads of it,
what `probe()` measured, and the probes stored before (`probes()`). Like the run results
(api/results.py): frozen dataclasses with the headline figures as attributes, `to_dict()`
(the command's `--json`) and `to_dataframe()` (pandas, optional)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainscale.api.frames import data_frame
from trainscale.hardware.machine import MachineReport
from trainscale.metrics.run_flags import ran_busy
from trainscale.reporting.probe_list import caveats, headline, probe_to_dict
from trainscale.results.records import ProbeRecord

FACT_COLUMNS = ("fact", "value")


@dataclass(frozen=True)
class MachineFacts:
    """This machine as `trainscale env` shows it: the facts every stored run records, the
    theoretical peaks MFU is measured against, and the newest full matmul probe of each
    device in the results store. Facts this machine does not expose are None."""

    host: str
    cpu_model: str | None
    logical_cores: int | None
    physical_cores: int | None
    usable_cores: tuple[int, ...]
    """The cores this process may run on (its affinity)."""
    memory_total_bytes: int | None
    bf16_native: bool
    """The CPU computes bf16 natively (AMX or AVX512-BF16): bf16 autocast pays off on it."""
    gpus: tuple[str, ...]
    """The CUDA devices' names, by index."""
    python: str
    torch_version: str
    cuda_version: str | None
    git_revision: str | None
    """The revision of the git work tree of the current directory, as runs record it."""
    peak_flops_per_s: Mapping[str, Mapping[str, float]]
    """Theoretical peak per device ('cpu', 'cuda: NAME') and precision, where known."""
    measured_flops_per_s: Mapping[str, Mapping[str, float]]
    """Per device, the best matmul FLOP/s of its newest full stored probe, per precision;
    a device with no such probe is absent."""
    probe_note: str | None
    """Why no probe was looked for (no results store), else None."""
    frameworks: Mapping[str, str | None] = field(default_factory=dict)
    """The other frameworks a run can train with: name -> installed release, or None."""
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The `trainscale env --json` object."""
    rows: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)
    """The (fact, value) lines of `trainscale env`'s tables."""

    @classmethod
    def from_report(cls, report: MachineReport) -> MachineFacts:
        """The typed facts of `hardware.machine.machine_report`'s report."""
        env = report.env
        gpus = env.get("gpus") or []
        peaks: dict[str, dict[str, float]] = {}
        cpu = {p: f["tflops"] * 1e12 for p, f in (report.peaks.get("cpu") or {}).items() if f}
        if cpu:
            peaks["cpu"] = cpu
        for gpu in report.peaks.get("gpus") or []:
            if gpu.get("tflops"):
                peaks[f"cuda: {gpu['name']}"] = {p: t * 1e12 for p, t in gpu["tflops"].items()}
        measured = {
            device: dict(probe["flops_per_s"])
            for device, probe in report.measured.items()
            if probe and probe.get("flops_per_s")
        }
        return cls(
            host=str(env.get("hostname") or ""),
            cpu_model=env.get("cpu_model"),
            logical_cores=env.get("logical_cores"),
            physical_cores=env.get("physical_cores"),
            usable_cores=tuple(env.get("usable_cores") or ()),
            memory_total_bytes=env.get("memory_total_bytes"),
            bf16_native=bool(env.get("bf16_native")),
            gpus=tuple(str(gpu.get("name")) for gpu in gpus),
            python=str(env.get("python") or ""),
            torch_version=str(env.get("torch_version") or ""),
            cuda_version=env.get("cuda_version"),
            git_revision=env.get("git_revision"),
            peak_flops_per_s=peaks,
            measured_flops_per_s=measured,
            frameworks=dict(report.frameworks),
            probe_note=report.measured_note,
            data=report.to_dict(),
            rows=(*report.fact_rows(), *report.hardware_rows()),
        )

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale env --json` object."""
        return dict(self.data)

    def to_dataframe(self) -> Any:
        """The lines of `trainscale env`'s tables: `fact`, `value` (text)."""
        lines = [dict(zip(FACT_COLUMNS, row, strict=True)) for row in self.rows]
        return data_frame(lines, FACT_COLUMNS)


STORED_PROBE_COLUMNS = (
    "probe_id",
    "created_at",
    "kind",
    "device_type",
    "device",
    "host",
    "workers",
    "figures",
    "caveats",
)


@dataclass(frozen=True)
class StoredProbe:
    """One stored measurement of `trainscale probe`, as `trainscale runs probes` lists it."""

    probe_id: str
    created_at: str
    kind: str
    """'matmul', 'dispatch', 'transfer' or 'allreduce'."""
    host: str | None
    device_type: str | None
    """'cpu' or 'cuda'."""
    device: str | None
    """The CPU model or the GPU's name it measured."""
    workers: int | None
    """Processes of an all-reduce (None for the other kinds)."""
    figures: str
    """Its headline figures in a few words ('' where the stored result lacks them)."""
    caveats: tuple[str, ...]
    """Why it is no yardstick: 'quick' (a smoke test's sizes), 'busy' (other work used the
    cores while it measured)."""
    result: Mapping[str, Any] = field(repr=False, compare=False)
    """The stored result: the kind's object of `trainscale probe --json`."""
    data: Mapping[str, Any] = field(repr=False, compare=False)
    """Its object of `trainscale runs probes --json`."""

    @classmethod
    def from_record(cls, record: ProbeRecord) -> StoredProbe:
        """The probe as stored."""
        return cls(
            probe_id=record.probe_id,
            created_at=record.created_at,
            kind=record.kind,
            host=record.host,
            device_type=record.device_type,
            device=record.device,
            workers=record.workers,
            figures=headline(record),
            caveats=tuple(caveats(record)),
            result=dict(record.result),
            data=probe_to_dict(record),
        )

    def to_dict(self) -> dict[str, Any]:
        """Its object of `trainscale runs probes --json`."""
        return dict(self.data)


@dataclass(frozen=True)
class StoredProbes:
    """Several stored probes, newest first (a sequence of `StoredProbe`)."""

    probes: tuple[StoredProbe, ...]

    def __iter__(self) -> Iterator[StoredProbe]:
        return iter(self.probes)

    def __len__(self) -> int:
        return len(self.probes)

    def __getitem__(self, index: int) -> StoredProbe:
        return self.probes[index]

    def to_dict(self) -> list[dict[str, Any]]:
        """The `trainscale runs probes --json` list."""
        return [probe.to_dict() for probe in self.probes]

    def to_dataframe(self) -> Any:
        """One row per probe: `STORED_PROBE_COLUMNS` (caveats joined by ', ')."""
        rows = [{**p.data, "figures": p.figures, "caveats": ", ".join(p.caveats)} for p in self]
        return data_frame(rows, STORED_PROBE_COLUMNS)


PROBE_COLUMNS = ("kind", "figure", "value", "unit")


@dataclass(frozen=True)
class MachineProbe:
    """What this machine achieved (`trainscale probe`): each measurement stored in the
    `probes` table, where runs' MFU and `simulate(cluster="local")` find it."""

    host: str
    device_type: str
    """'cpu' or 'cuda'."""
    device: str
    """The CPU model or the GPU's name: what the figures are stored under."""
    matmul_flops_per_s: Mapping[str, float]
    """The best square-matmul FLOP/s per precision."""
    fraction_of_peak: Mapping[str, float | None]
    """Each precision's best against the theoretical peak (None: no peak known)."""
    seconds_per_op: float | None
    """The cost of one operator of a training step of negligible arithmetic."""
    transfer_bytes_per_s: Mapping[str, float]
    """Pinned host-to-device ('h2d') and device-to-host ('d2h') copies (CUDA only)."""
    allreduce_alpha_s: float | None
    """The all-reduce's fitted latency."""
    allreduce_beta_s_per_byte: float | None
    """The all-reduce's fitted inverse bandwidth."""
    skipped: Mapping[str, str]
    """Measurements left out, with why."""
    busy: bool
    """Other work used the cores while it measured: its figures are not trusted."""
    quick: bool
    """A smoke test's small sizes: never a run's yardstick."""
    probe_ids: Mapping[str, str]
    """The stored id of each measurement."""
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The `trainscale probe --json` object."""

    @classmethod
    def from_result(cls, result: Mapping[str, Any]) -> MachineProbe:
        """The typed probe of `run_probe`'s result (the `--json` object)."""
        matmul = result.get("matmul") or {}
        precisions = matmul.get("precisions") or {}
        dispatch = result.get("dispatch") or {}
        transfer = result.get("transfer") or {}
        fit = (result.get("allreduce") or {}).get("fit") or {}
        return cls(
            host=result["host"],
            device_type=result["device_type"],
            device=result["device"],
            matmul_flops_per_s={p: f["best_flops_per_s"] for p, f in precisions.items()},
            fraction_of_peak={
                p: f.get("fraction_of_theoretical_peak") for p, f in precisions.items()
            },
            seconds_per_op=dispatch.get("seconds_per_op"),
            transfer_bytes_per_s={
                way: transfer[way]["best_bytes_per_s"] for way in ("h2d", "d2h") if way in transfer
            },
            allreduce_alpha_s=fit.get("alpha_s"),
            allreduce_beta_s_per_byte=fit.get("beta_s_per_byte"),
            skipped=dict(result.get("skipped") or {}),
            busy=ran_busy(result),
            quick=bool(result.get("quick")),
            probe_ids=dict(result.get("probe_ids") or {}),
            data=dict(result),
        )

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale probe --json` object."""
        return dict(self.data)

    def to_dataframe(self) -> Any:
        """One row per headline figure: `kind`, `figure`, `value`, `unit`."""
        figures = [
            *(("matmul", p, rate, "FLOP/s") for p, rate in self.matmul_flops_per_s.items()),
            ("dispatch", "per operator", self.seconds_per_op, "s"),
            *(("transfer", way, rate, "B/s") for way, rate in self.transfer_bytes_per_s.items()),
            ("allreduce", "alpha", self.allreduce_alpha_s, "s"),
            ("allreduce", "beta", self.allreduce_beta_s_per_byte, "s/B"),
        ]
        rows = [dict(zip(PROBE_COLUMNS, row, strict=True)) for row in figures if row[2] is not None]
        return data_frame(rows, PROBE_COLUMNS)
