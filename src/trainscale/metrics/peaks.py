"""Peak FLOP/s of devices, and model FLOPs utilisation (MFU) against them.

MFU is the share of a device's peak that the model's own arithmetic achieves:

    achieved FLOP/s = training FLOPs per sample x global samples per second
    MFU             = achieved FLOP/s / (peak FLOP/s per device x devices)

Peaks are **dense** (no 2:4 structured sparsity) and **theoretical**: datasheet figures for
GPUs, and cores x clock x FLOPs per cycle for CPUs. No program reaches them; `trainscale
probe` measures what a large matmul does reach on a machine, which is the second yardstick
(`mfu_vs_probe`). A device missing from the table has no peak, and then no MFU: never a
made-up figure, never zero.

GPU names are matched as `torch.cuda.get_device_name()` prints them ("NVIDIA H100 80GB HBM3",
"Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-80GB"). CPU facts come from /proc/cpuinfo, with the
/proc and /sys roots as parameters so tests can use fake trees.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
"""Precisions a peak can be given for. tf32 is the GPU tensor-core format used for fp32
matmuls and convolutions when torch allows it."""


@dataclass(frozen=True)
class DevicePeak:
    """One device of the peak table."""

    name: str
    """The table's name for the device, e.g. 'H100 SXM5'."""
    kind: str
    """The device family, e.g. 'H100': the key the price table uses."""
    tflops: Mapping[str, float]
    """Dense peak TFLOP/s per precision; a precision the device has no fast path for is absent."""
    source: str
    """Where the figures come from."""


# Figures are the vendors' datasheet peaks at boost clock. Datasheets quote tensor-core
# figures "with sparsity" for Ampere and later; the dense figure is half of that, and dense
# is what training does. fp16 on Volta/Turing is the tensor-core (mixed-precision) figure.
GPU_PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak(
        "H100 SXM5",
        "H100",
        # NVIDIA H100 Tensor Core GPU datasheet (2023), SXM column: FP32 67; TF32 989*,
        # BF16 1,979*, FP16 1,979* (* with sparsity).
        {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5},
        "NVIDIA H100 datasheet (SXM5), dense",
    ),
    DevicePeak(
        "H100 PCIe",
        "H100",
        # Same datasheet, PCIe column: FP32 51; TF32 756*, BF16 1,513*, FP16 1,513*.
        {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5},
        "NVIDIA H100 datasheet (PCIe), dense",
    ),
    DevicePeak(
        "H100 NVL",
        "H100",
        # Same datasheet, H100 NVL column (per GPU): FP32 60; TF32 835*, BF16 1,671*.
        {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5},
        "NVIDIA H100 datasheet (NVL, per GPU), dense",
    ),
    DevicePeak(
        "H200 SXM",
        "H200",
        # NVIDIA H200 Tensor Core GPU datasheet (2024), SXM column: FP32 67; TF32 989*,
        # BF16 1,979*, FP16 1,979*: the H100 SXM5's compute with more, faster memory.
        {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5},
        "NVIDIA H200 datasheet (SXM), dense",
    ),
    DevicePeak(
        "H200 NVL",
        "H200",
        # Same datasheet, NVL column: FP32 60; TF32 835*, BF16 1,671*, FP16 1,671*.
        {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5},
        "NVIDIA H200 datasheet (NVL), dense",
    ),
    DevicePeak(
        "A100",
        "A100",
        # NVIDIA A100 Tensor Core GPU datasheet (2021): FP32 19.5; TF32 156 (312*),
        # BF16 312 (624*), FP16 312 (624*). The SXM4 and PCIe columns list the same peaks
        # (the PCIe card sustains less of it at its lower power limit).
        {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
        "NVIDIA A100 datasheet (SXM4 and PCIe list the same peaks), dense",
    ),
    DevicePeak(
        "V100 SXM2",
        "V100",
        # NVIDIA Tesla V100 datasheet (2020), SXM2: FP32 15.7, Tensor Performance 125.
        # Volta has no bf16 or tf32 hardware.
        {"fp32": 15.7, "fp16": 125.0},
        "NVIDIA V100 datasheet (SXM2); fp16 = tensor-core mixed precision",
    ),
    DevicePeak(
        "V100 PCIe",
        "V100",
        # Same datasheet, PCIe: FP32 14, Tensor Performance 112.
        {"fp32": 14.0, "fp16": 112.0},
        "NVIDIA V100 datasheet (PCIe); fp16 = tensor-core mixed precision",
    ),
    DevicePeak(
        "V100S PCIe",
        "V100",
        # Same datasheet, V100S PCIe: FP32 16.4, Tensor Performance 130.
        {"fp32": 16.4, "fp16": 130.0},
        "NVIDIA V100 datasheet (V100S PCIe); fp16 = tensor-core mixed precision",
    ),
    DevicePeak(
        "T4",
        "T4",
        # NVIDIA T4 datasheet: FP32 8.1, Mixed Precision (FP16/FP32) 65. Turing has no bf16
        # or tf32 hardware.
        {"fp32": 8.1, "fp16": 65.0},
        "NVIDIA T4 datasheet; fp16 = tensor-core mixed precision",
    ),
    DevicePeak(
        "K80 (one GK210)",
        "K80",
        # NVIDIA Tesla K80 datasheet: 8.73 TFLOPS single precision per board with GPU Boost.
        # A board holds two GK210 GPUs and CUDA sees each as its own device, so one device
        # is half the board. Kepler has no fast fp16, bf16 or tf32.
        {"fp32": 4.365},
        "NVIDIA K80 datasheet (board figure / 2 GPUs), boost clock",
    ),
)

_WORD = re.compile(r"[A-Z0-9]+")


def _tokens(name: str) -> list[str]:
    # "NVIDIA A100-SXM4-80GB" -> ["NVIDIA", "A100", "SXM4", "80GB"]
    return _WORD.findall(name.upper())


def _entry(name: str) -> DevicePeak:
    return next(p for p in GPU_PEAKS if p.name == name)


def match_gpu(device_name: str | None) -> DevicePeak | None:
    """The peak-table entry for a GPU name as torch reports it, or None if it is not known.

    A MIG slice ("... MIG 1g.10gb") is a fraction of a GPU and has no entry; nor has a bare
    "H100" or "V100" whose form factor the name does not say (their peaks differ).
    """
    if not device_name:
        return None
    tokens = _tokens(device_name)
    words = set(tokens)
    if "MIG" in words:
        return None
    if "H200" in words:
        return _entry("H200 NVL" if "NVL" in words else "H200 SXM")
    if "H100" in words:
        if "NVL" in words:
            return _entry("H100 NVL")
        if "PCIE" in words:
            return _entry("H100 PCIe")
        if "HBM3" in words or any(t.startswith("SXM") for t in tokens):
            # The SXM5 board reports itself as "NVIDIA H100 80GB HBM3".
            return _entry("H100 SXM5")
        return None
    if "A100" in words:
        return _entry("A100")
    if "V100S" in words:
        return _entry("V100S PCIe")
    if "V100" in words:
        if any(t.startswith("SXM2") for t in tokens):
            return _entry("V100 SXM2")
        if "PCIE" in words:
            return _entry("V100 PCIe")
        return None
    if "T4" in words:
        return _entry("T4")
    if "K80" in words:
        return _entry("K80 (one GK210)")
    return None


# -- CPUs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuFacts:
    """What the theoretical CPU peak is computed from."""

    model_name: str | None
    vendor: str | None
    family: int | None
    model: int | None
    flags: frozenset[str] = field(default_factory=frozenset)
    max_frequency_hz: float | None = None
    frequency_source: str | None = None
    """Where the clock came from: 'psutil max', 'cpufreq max' or 'cpuinfo MHz'."""
    physical_cores: int | None = None
    logical_cores: int | None = None


def _int_or_none(text: str) -> int | None:
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def read_cpu_facts(proc_root: Path | None = None, sys_root: Path | None = None) -> CpuFacts:
    """Read the CPU facts the peak needs from ``<proc_root>/cpuinfo`` and cpufreq.

    The clock is the highest available of: psutil's maximum frequency, cpufreq's
    ``cpuinfo_max_freq``, then the first processor's "cpu MHz" (in a VM usually the nominal
    clock). psutil is only asked when the roots are the real ones.
    """
    import os

    proc = Path("/proc") if proc_root is None else Path(proc_root)
    sysfs = Path("/sys") if sys_root is None else Path(sys_root)
    facts: dict[str, Any] = {"model_name": None, "vendor": None, "family": None, "model": None}
    flags: set[str] = set()
    mhz: float | None = None
    try:
        text = (proc / "cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if flags:
                break  # the first processor is enough; the rest repeat it
            continue
        key, value = key.strip(), value.strip()
        if key == "model name" and facts["model_name"] is None:
            facts["model_name"] = value
        elif key == "vendor_id" and facts["vendor"] is None:
            facts["vendor"] = value
        elif key == "cpu family" and facts["family"] is None:
            facts["family"] = _int_or_none(value)
        elif key == "model" and facts["model"] is None:
            facts["model"] = _int_or_none(value)
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "cpu MHz" and mhz is None:
            try:
                mhz = float(value)
            except ValueError:
                mhz = None

    frequency_hz, source = None, None
    if proc_root is None and sys_root is None:
        try:
            import psutil

            freq = psutil.cpu_freq()
            if freq is not None and freq.max and freq.max > 0:
                frequency_hz, source = freq.max * 1e6, "psutil max"
        except (ImportError, OSError, RuntimeError, NotImplementedError):
            pass
    if frequency_hz is None:
        try:
            khz = int((sysfs / "devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text())
            if khz > 0:
                frequency_hz, source = khz * 1e3, "cpufreq max"
        except (OSError, ValueError):
            pass
    if frequency_hz is None and mhz:
        frequency_hz, source = mhz * 1e6, "cpuinfo MHz"

    physical = None
    if proc_root is None:
        try:
            import psutil

            physical = psutil.cpu_count(logical=False)
        except ImportError:
            physical = None
    return CpuFacts(
        model_name=facts["model_name"],
        vendor=facts["vendor"],
        family=facts["family"],
        model=facts["model"],
        flags=frozenset(flags),
        max_frequency_hz=frequency_hz,
        frequency_source=source,
        physical_cores=physical,
        logical_cores=os.cpu_count() if proc_root is None else None,
    )


def cpu_flops_per_cycle(facts: CpuFacts, precision: str) -> tuple[float | None, str]:
    """Peak FLOPs per cycle of one core for `precision`, and how it was worked out.

    x86 only, from the vector and matrix units the flags announce:
    - fp32 with AVX-512: 2 FMA units x 16 lanes x 2 = 64 (Intel Xeon Gold/Platinum and later;
      parts with one 512-bit FMA unit do half). AMD Zen 4 runs AVX-512 on 256-bit units: 32.
    - fp32 with AVX2 + FMA: 2 FMA units x 8 lanes x 2 = 32 (Haswell and later, Zen 2 and
      later); Zen 1 has 128-bit units: 16.
    - fp32 with AVX only: one 8-wide add and one 8-wide multiply per cycle = 16.
    - bf16 with AMX: 1024 per core per cycle (the tile unit); with AVX512-BF16: twice the
      fp32 AVX-512 rate (each lane does two products); otherwise bf16 is emulated through
      fp32 and the fp32 figure is its ceiling.
    Other architectures (aarch64, ...) return None: no figure rather than a guess.
    """
    flags = facts.flags
    if precision not in ("fp32", "bf16"):
        return None, f"CPUs have no {precision} matrix units in the table"
    amd = facts.vendor == "AuthenticAMD"
    if "avx512f" in flags:
        # Zen 4 (family 0x19) splits 512-bit work over its 256-bit units.
        fp32 = 32.0 if amd and (facts.family or 0) < 0x1A else 64.0
        how = f"AVX-512: {fp32:g} fp32 FLOPs/cycle"
    elif "avx2" in flags and "fma" in flags:
        zen1 = amd and facts.family == 0x17 and facts.model is not None and facts.model < 0x30
        fp32 = 16.0 if zen1 else 32.0
        how = f"AVX2+FMA: {fp32:g} fp32 FLOPs/cycle"
    elif "avx" in flags:
        fp32, how = 16.0, "AVX (no FMA): 16 fp32 FLOPs/cycle"
    else:
        return None, "no AVX flags in cpuinfo (or not an x86 CPU): no CPU peak in the table"
    if precision == "fp32":
        return fp32, how
    if "amx_bf16" in flags:
        return 1024.0, "AMX-BF16: 1024 bf16 FLOPs/cycle"
    if "avx512_bf16" in flags:
        return 2 * fp32, f"AVX512-BF16: {2 * fp32:g} bf16 FLOPs/cycle"
    return fp32, f"bf16 emulated through fp32 ({how})"


@dataclass(frozen=True)
class Peak:
    """The peak a run (or a machine) is measured against."""

    flops_per_s: float
    """Peak of all devices together."""
    per_device_flops_per_s: float
    devices: int
    """GPUs, or CPU cores."""
    device: str
    """The table's device name ('H100 SXM5') or the CPU model."""
    kind: str
    """Price-table key of one device: 'H100', 'cpu-core', ..."""
    precision: str
    """The precision of the peak: 'tf32' for an fp32 run on tensor cores."""
    source: str
    theoretical: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The peak as stored in a run summary (TFLOP/s)."""
        return {
            "tflops": self.flops_per_s / 1e12,
            "per_device_tflops": self.per_device_flops_per_s / 1e12,
            "devices": self.devices,
            "device": self.device,
            "kind": self.kind,
            "precision": self.precision,
            "source": self.source,
            "theoretical": self.theoretical,
        }


def gpu_peak(device_name: str | None, precision: str, devices: int = 1) -> Peak | None:
    """The table's dense peak of `devices` GPUs named `device_name` at `precision`."""
    entry = match_gpu(device_name)
    if entry is None or precision not in entry.tflops or devices < 1:
        return None
    per_device = entry.tflops[precision] * 1e12
    return Peak(
        flops_per_s=per_device * devices,
        per_device_flops_per_s=per_device,
        devices=devices,
        device=entry.name,
        kind=entry.kind,
        precision=precision,
        source=f"table: {entry.source}",
    )


def cpu_peak(facts: CpuFacts, precision: str, cores: int) -> Peak | None:
    """Theoretical peak of `cores` cores: cores x max clock x FLOPs/cycle/core.

    None when the clock or the FLOPs per cycle are unknown. Every core counts as a full core:
    two hyperthreads of one core share its units, so pass physical cores where they are known.
    """
    per_cycle, how = cpu_flops_per_cycle(facts, precision)
    if per_cycle is None or not facts.max_frequency_hz or cores < 1:
        return None
    per_core = per_cycle * facts.max_frequency_hz
    ghz = facts.max_frequency_hz / 1e9
    return Peak(
        flops_per_s=per_core * cores,
        per_device_flops_per_s=per_core,
        devices=cores,
        device=facts.model_name or "cpu",
        kind="cpu-core",
        precision=precision,
        source=(f"theoretical: {cores} core(s) x {ghz:.2f} GHz ({facts.frequency_source}) x {how}"),
    )


def peak_precision(run_precision: str, device_type: str, tf32: bool = False) -> str:
    """The precision of the peak a run is measured against.

    Autocast runs matmuls and convolutions in bf16/fp16. An fp32 run on a GPU uses the TF32
    tensor cores when torch allows it (cuDNN convolutions do by default), so `tf32` says so.
    """
    if device_type == "cuda" and run_precision == "fp32" and tf32:
        return "tf32"
    return run_precision


def achieved_flops_per_s(
    flops_per_sample: float | None, samples_per_s: float | None
) -> float | None:
    """Model FLOP/s a run achieved: training FLOPs per sample x global samples per second.

    Per step this is flops_per_sample x global batch; None when either figure is missing.
    """
    if flops_per_sample is None or samples_per_s is None:
        return None
    if flops_per_sample <= 0 or samples_per_s <= 0:
        return None
    return float(flops_per_sample) * float(samples_per_s)


def mfu(achieved: float | None, peak: float | None) -> float | None:
    """Model FLOPs utilisation: achieved FLOP/s / peak FLOP/s; None without both."""
    if achieved is None or peak is None or peak <= 0:
        return None
    return achieved / peak


def table_rows(precisions: Iterable[str] = PRECISIONS) -> list[dict[str, Any]]:
    """The GPU peak table as rows (for docs and `trainscale env`)."""
    wanted = tuple(precisions)
    return [
        {"device": p.name, **{k: p.tflops.get(k) for k in wanted}, "source": p.source}
        for p in GPU_PEAKS
    ]
