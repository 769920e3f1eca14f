"""This machine, as `trainscale env` shows it: the facts every stored run records, the
theoretical peaks MFU is measured against, and the energy counters it exposes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainscale.hardware import facts
from trainscale.hardware.cpulist import format_cpulist
from trainscale.hardware.figures import (
    latest_full_probe,
    machine_energy_sources,
    machine_peaks,
)
from trainscale.hardware.peaks import in_precision_order
from trainscale.metrics.rates import flops_text
from trainscale.metrics.run_flags import ran_busy

_GIB = 1024**3


@dataclass
class MachineReport:
    """This machine's facts, peaks and energy sources, and their text."""

    env: dict[str, Any]
    """`hardware.facts.collect_environment()`."""
    peaks: dict[str, Any]
    """`hardware.figures.machine_peaks(env)`."""
    energy: dict[str, str]
    """`hardware.figures.machine_energy_sources(env)`."""
    measured: dict[str, Any] = field(default_factory=dict)
    """Per device ('cpu', 'cuda: NAME'), the newest full matmul probe of it on this host in
    the store (`measured_matmul`), or None where none is stored."""
    measured_note: str | None = None
    """Why no probe was looked for (no store), else None."""
    frameworks: dict[str, str | None] = field(default_factory=dict)
    """The frameworks besides PyTorch a run can train with, by name: the installed release,
    or None where it is not installed (found without importing them)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `trainscale env --json` prints."""
        measured = {"probes": self.measured, "note": self.measured_note}
        return {**self.env, "peaks": self.peaks, "energy_sources": self.energy} | {
            "frameworks": self.frameworks,
            "measured_matmul": measured,
        }

    def fact_rows(self) -> list[tuple[str, str]]:
        """(fact, value) lines about the machine and its libraries."""
        rows = fact_rows(self.env)
        if self.frameworks:
            text = ", ".join(
                f"{name} {release}" if release else f"{name} (not installed)"
                for name, release in self.frameworks.items()
            )
            at = next(i for i, (fact, _) in enumerate(rows) if fact == "numpy")
            rows.insert(at + 1, ("other frameworks", text))
        return rows

    def hardware_rows(self) -> list[tuple[str, str]]:
        """(fact, value) lines: the peaks, what a probe measured, the energy counters."""
        return hardware_rows(self.peaks, self.energy, self.measured_rows())

    def measured_rows(self) -> list[tuple[str, str]]:
        """(fact, value) lines: each device's newest full matmul probe, or why there is none."""
        if self.measured_note is not None:
            return [("measured matmul (trainscale probe)", self.measured_note)]
        rows = []
        for device, probe in self.measured.items():
            if probe is None:
                text = "none stored for this host: `trainscale probe` measures it"
            else:
                rates = probe["flops_per_s"]
                text = ", ".join(f"{p} {flops_text(rates[p])}" for p in in_precision_order(rates))
                text = text or "no readable figure"
                if probe.get("threads"):
                    text += f" on {probe['threads']} thread(s)"
                when = probe["created_at"][:16].replace("T", " ")  # to the minute, UTC
                text += f" (probe {probe['probe_id'][:8]}, {when}"
                text += ", busy: other work used the cores)" if probe["busy"] else ")"
            rows.append((f"measured matmul, {device}", text))
        return rows

    def bf16_summary(self) -> str:
        return bf16_summary(self.env)


def machine_report(store: Any = None, no_store: str | None = None) -> MachineReport:
    """Read this machine (torch is imported here, not at import time), and from the open
    results `store` the newest full matmul probe of each of its devices; `no_store` says
    why there is no store to read."""
    env = facts.collect_environment()
    report = MachineReport(env, machine_peaks(env), machine_energy_sources(env))
    if store is None:
        report.measured_note = no_store
        return report
    devices = [("cpu", "cpu", env.get("cpu_model") or "cpu")]
    names = dict.fromkeys(gpu.get("name") for gpu in env.get("gpus") or [] if gpu.get("name"))
    devices += [(f"cuda: {name}", "cuda", str(name)) for name in names]
    host = str(env.get("hostname") or "")
    for label, device_type, device in devices:
        probe = latest_full_probe(store, host, device, device_type)
        report.measured[label] = None if probe is None else measured_matmul(probe)
    return report


def measured_matmul(probe: Any) -> dict[str, Any]:
    """The figures of a stored matmul probe `env` shows: best FLOP/s per precision."""
    precisions = probe.result.get("precisions")
    if not isinstance(precisions, dict):  # a row written by hand, or by an older version
        precisions = {}
    return {
        "probe_id": probe.probe_id,
        "created_at": probe.created_at,
        "threads": probe.result.get("threads"),
        "busy": ran_busy(probe.result),
        "flops_per_s": {
            precision: float(rate)
            for precision, figures in precisions.items()
            if isinstance(figures, dict)
            and isinstance(rate := figures.get("best_flops_per_s"), (int, float))
            and not isinstance(rate, bool)
            and rate > 0
        },
    }


def _tflops(value: float) -> str:
    return f"{value:.3g} TFLOP/s" if value >= 1 else f"{value * 1e3:.3g} GFLOP/s"


def hardware_rows(
    peaks: dict[str, Any], energy: dict[str, str], measured: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Peaks (what MFU is measured against), the `measured` rows beside them, and the energy
    counters this machine exposes."""
    rows = []
    for precision, peak in peaks["cpu"].items():
        text = (
            f"{_tflops(peak['tflops'])} ({peak['source']})"
            if peak
            else "unknown (no figure for this CPU: runs get no MFU)"
        )
        rows.append((f"theoretical CPU peak, {precision}", text))
    for gpu in peaks["gpus"]:
        if gpu["tflops"]:
            figures = ", ".join(f"{p} {_tflops(v)}" for p, v in gpu["tflops"].items())
            text = f"{gpu['table_device']}: {figures} (dense; {gpu['source']})"
        else:
            text = "not in the peak table: runs on it get no MFU"
        rows.append((f"GPU {gpu['index']} peak", text))
    rows += measured
    rows.append(("energy: CPU package (RAPL)", energy["cpu_package"]))
    rows.append(("energy: GPU (NVML)", energy["gpu"]))
    return rows


def bf16_summary(env: dict[str, Any]) -> str:
    """The one line that tells whether bf16 autocast can pay off on this CPU."""
    if not env.get("bf16_native"):
        return "bf16 autocast: emulated — expect bf16 to be slower than fp32 on this CPU"
    flags = set(env.get("cpu_flags_of_interest") or ())
    if flags & {"amx_bf16", "avx512_bf16"}:
        return "bf16 autocast: native (AMX/AVX512-BF16)"
    return "bf16 autocast: native (CPU bf16 instructions)"


def fact_rows(env: dict[str, Any]) -> list[tuple[str, str]]:
    """(fact, value) lines of the environment a run records."""
    cpu = env["cpu_model"] or "unknown"
    if env["cpu_vendor"]:
        cpu += f" ({env['cpu_vendor']})"
    usable = env["usable_cores"]
    numa = (
        "; ".join(f"node{n['node']}: {format_cpulist(n['cpus']) or '-'}" for n in env["numa_nodes"])
        or "not reported"
    )
    memory = (
        f"{env['memory_total_bytes'] / _GIB:.1f} GiB total, "
        f"{env['memory_available_bytes'] / _GIB:.1f} GiB available"
    )
    gpus = (
        "\n".join(
            f"{gpu['index']}: {gpu['name']} ({gpu['memory_bytes'] / _GIB:.1f} GiB, "
            f"compute capability {gpu['capability']})"
            for gpu in env["gpus"]
        )
        or "none (CUDA not available)"
    )
    if env["git_revision"] is None:
        git = "not in a git repository (or git unavailable)"
    else:
        git = env["git_revision"][:12] + (" (uncommitted changes)" if env["git_dirty"] else "")
    rows = [
        ("host", env["hostname"]),
        ("os", env["os"]),
        ("python", env["python"]),
        ("torch", env["torch_version"]),
        ("numpy", env["numpy_version"]),
        ("trainscale", env["trainscale_version"]),
        ("cpu", cpu),
        ("logical / physical cores", f"{env['logical_cores']} / {env['physical_cores']}"),
        ("usable cores", f"{format_cpulist(usable)} ({len(usable)})" + _quota_text(env)),
        ("numa nodes", numa),
        ("memory", memory),
        ("torch cpu capability", str(env["cpu_capability"])),
        ("cpu flags of interest", ", ".join(env["cpu_flags_of_interest"]) or "none"),
        ("bf16 native", "yes" if env["bf16_native"] else "no"),
        ("torch threads (default)", str(env["torch_num_threads_default"])),
        ("gpus", gpus),
        ("cuda", env["cuda_version"] or "-"),
        ("git revision", git),
    ]
    return [(fact, str(value)) for fact, value in rows]


def _quota_text(env: dict[str, Any]) -> str:
    """', cgroup CPU quota 4.0 cores' where the process has one (older records: none)."""
    quota = env.get("cpu_quota")
    return "" if quota is None else f", cgroup CPU quota {quota:g} cores"
