"""Peak FLOP/s of devices, and model FLOPs utilisation (MFU) against them.

MFU is the share of a device's peak that the model's own arithmetic achieves:

    achieved FLOP/s = training FLOPs per sample x global samples per second
    MFU             = achieved FLOP/s / (peak FLOP/s per device x devices)

Peaks are **dense** (no 2:4 structured sparsity) and **theoretical**: datasheet figures for
GPUs, and cores x clock x FLOPs per cycle for CPUs. No program reaches them; `trainscale
probe` measures what a large matmul does reach on a machine, which is the second yardstick
(`mfu_vs_probe`). A device missing from the table has no peak, and then no MFU: never a
made-up figure, never zero.

The GPU figures and their sources are data: `gpu_peaks.toml`, shipped with the package.
GPU names are matched as `torch.cuda.get_device_name()` prints them ("NVIDIA H100 80GB HBM3",
"Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-80GB"). CPU facts come from `hardware.facts`.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from trainscale.hardware.facts import NOMINAL_CLOCK, CpuFacts

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

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


PEAK_TABLE = "gpu_peaks.toml"
"""The GPU peak table: a data file of this package."""

_ENTRY_KEYS = ("name", "kind", "source", "tflops")


def parse_gpu_peaks(raw: Mapping[str, Any], origin: str = PEAK_TABLE) -> tuple[DevicePeak, ...]:
    """The entries of a parsed peak table; ValueError naming the entry and key otherwise.

    Every entry needs a name, a kind, a source and at least one positive figure, with
    precisions from `PRECISIONS` only; names are unique.
    """
    entries = raw.get("gpu")
    if set(raw) != {"gpu"} or not isinstance(entries, list) or not entries:
        raise ValueError(f"{origin}: expected [[gpu]] entries and nothing else")
    peaks: list[DevicePeak] = []
    for index, entry in enumerate(entries, start=1):
        where = f"{origin}: gpu entry {index}"
        if not isinstance(entry, dict) or set(entry) != set(_ENTRY_KEYS):
            keys = sorted(entry) if isinstance(entry, dict) else entry
            raise ValueError(f"{where}: keys must be {', '.join(_ENTRY_KEYS)}, got {keys}")
        for key in ("name", "kind", "source"):
            if not isinstance(entry[key], str) or not entry[key].strip():
                raise ValueError(f"{where}: {key} must be non-empty text")
        tflops = entry["tflops"]
        if not isinstance(tflops, dict) or not tflops:
            raise ValueError(f"{where} ({entry['name']}): tflops must be a table of figures")
        for precision, value in tflops.items():
            if precision not in PRECISIONS:
                raise ValueError(
                    f"{where} ({entry['name']}): unknown precision {precision!r}; "
                    f"one of {', '.join(PRECISIONS)}"
                )
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or value <= 0:
                raise ValueError(
                    f"{where} ({entry['name']}): tflops.{precision} must be a positive "
                    f"number, got {value!r}"
                )
        if any(p.name == entry["name"] for p in peaks):
            raise ValueError(f"{where}: name {entry['name']!r} is listed twice")
        peaks.append(
            DevicePeak(
                name=entry["name"],
                kind=entry["kind"],
                tflops={k: float(v) for k, v in tflops.items()},
                source=entry["source"],
            )
        )
    return tuple(peaks)


@functools.cache
def gpu_peaks() -> tuple[DevicePeak, ...]:
    """The GPU peak table shipped with trainscale (read once, on first use)."""
    text = resources.files("trainscale.hardware").joinpath(PEAK_TABLE).read_text(encoding="utf-8")
    return parse_gpu_peaks(tomllib.loads(text))


_WORD = re.compile(r"[A-Z0-9]+")


def _tokens(name: str) -> list[str]:
    # "NVIDIA A100-SXM4-80GB" -> ["NVIDIA", "A100", "SXM4", "80GB"]
    return _WORD.findall(name.upper())


def _entry(name: str) -> DevicePeak:
    return next(p for p in gpu_peaks() if p.name == name)


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


def in_precision_order(names: Iterable[str]) -> list[str]:
    """Precisions as they are named everywhere (fp32, tf32, bf16, fp16), others after."""
    given = list(names)
    return [p for p in PRECISIONS if p in given] + sorted(set(given) - set(PRECISIONS))


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
    return gpu_peak_of_mix(device_name, {precision: 1.0}, devices)


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
    clock = f"{ghz:.2f} GHz ({facts.frequency_source})"
    if facts.frequency_source == NOMINAL_CLOCK:
        # No maximum clock is visible (a VM, or no cpufreq): "cpu MHz" is the clock the
        # kernel reports, often the nominal one, and cores that boost compute above it.
        clock = f"{ghz:.2f} GHz ({NOMINAL_CLOCK}; no maximum clock visible: boosting cores beat it)"
    return Peak(
        flops_per_s=per_core * cores,
        per_device_flops_per_s=per_core,
        devices=cores,
        device=facts.model_name or "cpu",
        kind="cpu-core",
        precision=precision,
        source=f"theoretical: {cores} core(s) x {clock} x {how}",
    )


def rate_of_mix(mix: Mapping[str, float], rate: Callable[[str], float | None]) -> float | None:
    """The FLOP/s of work split across precisions (`mix`: precision -> share of the FLOPs)
    when each part runs at its precision's `rate`: the parts take turns, so their times add
    up (total / sum(share x total / rate)). None when a part has no rate, or nothing does."""
    seconds_per_flop = 0.0
    for precision, share in mix.items():
        if share <= 0:
            continue
        part_rate = rate(precision)
        if not part_rate or part_rate <= 0:
            return None
        seconds_per_flop += share / part_rate
    return 1.0 / seconds_per_flop if seconds_per_flop > 0 else None


def mix_name(mix: Mapping[str, float]) -> str:
    """How a mix of precisions is named where one precision would be: 'tf32', 'fp32+tf32'."""
    return "+".join(in_precision_order(p for p, share in mix.items() if share > 0))


def gpu_peak_of_mix(
    device_name: str | None, mix: Mapping[str, float], devices: int = 1
) -> Peak | None:
    """The table's dense peak of `devices` GPUs named `device_name` for work split across
    precisions (`mix`: precision -> share of the FLOPs, as `rate_of_mix` takes it); None
    when the table lacks the GPU or one of the precisions."""
    parts = {p: share for p, share in mix.items() if share > 0}
    entry = match_gpu(device_name)
    if entry is None or not parts or devices < 1:
        return None
    per_device = rate_of_mix(parts, lambda p: entry.tflops.get(p, 0.0) * 1e12)
    if per_device is None:
        return None
    source = f"table: {entry.source}"
    if len(parts) > 1:
        shares = ", ".join(
            f"{parts[p]:.0%} in {p} ({entry.tflops[p]:g})" for p in in_precision_order(parts)
        )
        source += f"; the run's FLOPs by the precision they computed in: {shares} TFLOP/s"
    return Peak(
        flops_per_s=per_device * devices,
        per_device_flops_per_s=per_device,
        devices=devices,
        device=entry.name,
        kind=entry.kind,
        precision=mix_name(parts),
        source=source,
    )


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
