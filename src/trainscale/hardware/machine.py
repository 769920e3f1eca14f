"""This machine, as `trainscale env` shows it: the facts every stored run records, the
theoretical peaks MFU is measured against, and the energy counters it exposes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainscale.hardware import facts
from trainscale.hardware.cpulist import format_cpulist
from trainscale.hardware.figures import machine_energy_sources, machine_peaks

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

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `trainscale env --json` prints."""
        return {**self.env, "peaks": self.peaks, "energy_sources": self.energy}

    def fact_rows(self) -> list[tuple[str, str]]:
        """(fact, value) lines about the machine and its libraries."""
        return fact_rows(self.env)

    def hardware_rows(self) -> list[tuple[str, str]]:
        """(fact, value) lines: the peaks and the energy counters."""
        return hardware_rows(self.peaks, self.energy)

    def bf16_summary(self) -> str:
        return bf16_summary(self.env)


def machine_report() -> MachineReport:
    """Read this machine (torch is imported here, not at import time)."""
    env = facts.collect_environment()
    return MachineReport(env, machine_peaks(env), machine_energy_sources(env))


def _tflops(value: float) -> str:
    return f"{value:.3g} TFLOP/s" if value >= 1 else f"{value * 1e3:.3g} GFLOP/s"


def hardware_rows(peaks: dict[str, Any], energy: dict[str, str]) -> list[tuple[str, str]]:
    """Peaks (what MFU is measured against) and the energy counters this machine exposes."""
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
        ("usable cores", f"{format_cpulist(usable)} ({len(usable)})"),
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
