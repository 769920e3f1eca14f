"""What a run costs: device-hours times a price per device-hour from a user-editable table.

    cost of a run       = devices x training clock (h) x price per device-hour
    cost to the target  = devices x time to target (h) x price per device-hour

Devices are GPUs for a GPU run and cores (vCPUs) for a CPU run; the training clock is the
methodology's (evaluation and start-up excluded). A GPU's hourly price is far higher than a
core's, and yet the GPU run can cost less, because it finishes sooner: these figures show it.

The prices come from hardware/prices.py's table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CPU_CORE = "cpu-core"
"""Price key of one CPU core (vCPU) for one hour."""


def device_hours(devices: float, seconds: float) -> float:
    """Devices x hours."""
    return devices * seconds / 3600.0


def cost_usd(
    devices: float | None, seconds: float | None, price_per_hour: float | None
) -> float | None:
    """devices x seconds / 3600 x price; None when any of them is unknown."""
    if devices is None or seconds is None or price_per_hour is None:
        return None
    if devices <= 0 or seconds < 0:
        return None
    return device_hours(devices, seconds) * price_per_hour


@dataclass(frozen=True)
class CostedSetting:
    """One setting of a workload, with what it costs (for the GPU-versus-CPU sentence)."""

    label: str
    device_type: str
    """'cuda' or 'cpu'."""
    devices: int
    price_key: str
    price_per_device_hour: float
    cost_usd: float | None
    cost_to_target_usd: float | None = None
    num_samples: int | None = None

    @property
    def hourly_usd(self) -> float:
        """What the setting's devices cost per hour, all together."""
        return self.devices * self.price_per_device_hour

    def per_million_samples_usd(self) -> float | None:
        if self.cost_usd is None or not self.num_samples:
            return None
        return self.cost_usd / self.num_samples * 1e6


def gpu_versus_cpu(settings: list[CostedSetting]) -> str | None:
    """One sentence comparing the cheapest GPU setting with the cheapest CPU setting.

    Compared on cost to the target accuracy when both reached it (the same result bought),
    else on cost per million training samples (the same work bought). None unless both
    device types have a cost.
    """
    gpus = [s for s in settings if s.device_type == "cuda"]
    cpus = [s for s in settings if s.device_type == "cpu"]
    for measure, what in (
        (lambda s: s.cost_to_target_usd, "to reach the target accuracy"),
        (CostedSetting.per_million_samples_usd, "per million training samples"),
    ):
        gpu = _cheapest(gpus, measure)
        cpu = _cheapest(cpus, measure)
        gpu_cost = None if gpu is None else measure(gpu)
        cpu_cost = None if cpu is None else measure(cpu)
        if gpu is None or cpu is None or gpu_cost is None or cpu_cost is None:
            continue
        if gpu_cost < cpu_cost:
            verdict = "costs less"
        elif gpu_cost > cpu_cost:
            verdict = "costs more"
        else:
            verdict = "costs the same"
        pricier = gpu_cost < cpu_cost and gpu.hourly_usd > cpu.hourly_usd
        return (
            f"The GPU run '{gpu.label}' {verdict} {what} (${gpu_cost:.4g}, at "
            f"${gpu.hourly_usd:.4g}/h for {gpu.devices} GPU(s)) than the CPU run "
            f"'{cpu.label}' (${cpu_cost:.4g}, at ${cpu.hourly_usd:.4g}/h for "
            f"{cpu.devices} core(s))"
            + (", even though its hourly price is higher." if pricier else ".")
        )
    return None


def _cheapest(settings: list[CostedSetting], measure: Any) -> CostedSetting | None:
    priced = [s for s in settings if measure(s) is not None]
    return min(priced, key=measure) if priced else None
