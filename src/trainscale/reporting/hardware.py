"""A configuration's hardware figures for the report: MFU, energy and cost. Pure: no I/O.

Costs are computed here, at report time, from the price table the report was given: prices
change and are the user's to set, so they are never stored with a run. Devices are the GPUs
of a GPU run and the cores of a CPU run, as its summary recorded them (`hardware`); runs
stored before that was recorded fall back to the workers (GPU) or the cores the report
counts (CPU).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from trainscale.hardware.peaks import match_gpu
from trainscale.hardware.prices import PriceTable
from trainscale.metrics import stats
from trainscale.metrics.cost import CPU_CORE, CostedSetting, cost_usd, gpu_versus_cpu
from trainscale.results.records import RunRecord
from trainscale.results.stored_figures import StoredFigures


def _median(values: Sequence[float]) -> float | None:
    return stats.median(values) if values else None


def run_devices(record: RunRecord, cores: int) -> tuple[str, int, str | None, str | None]:
    """(device type, devices, price-table kind, device name) of a run."""
    hardware = record.figures.hardware
    if hardware is not None:
        return hardware.device_type, hardware.devices, hardware.kind, hardware.device
    if record.settings.device == "cuda":
        name = record.machine.gpu_name
        entry = match_gpu(name)
        return "cuda", int(record.world_size or 1), entry.kind if entry else None, name
    return "cpu", cores, CPU_CORE, record.machine.cpu_model


def price_of(
    prices: PriceTable | None, device_type: str, kind: str | None, name: str | None
) -> tuple[str, float] | None:
    """(key, $ per device-hour) for a device, or None when the table has no price for it."""
    if prices is None:
        return None
    if device_type == "cpu":
        return prices.price(CPU_CORE)
    entry = match_gpu(name)
    found = prices.price(entry.name if entry else None, kind)
    return found or prices.price_for_gpu_name(name)


def configuration_figures(
    runs: Sequence[RunRecord],
    cores: int,
    time_to_target_s: float | None,
    prices: PriceTable | None,
) -> dict[str, Any]:
    """The Configuration fields this module fills, medians over the completed runs."""
    figures = [r.figures for r in runs]

    def median_of(read: Callable[[StoredFigures], float | None]) -> float | None:
        return _median([value for f in figures if (value := read(f)) is not None])

    device_type, devices, kind, name = run_devices(runs[0], cores)
    price = price_of(prices, device_type, kind, name)
    per_hour = price[1] if price else None
    return {
        "achieved_tflops": median_of(lambda f: f.achieved_tflops),
        "mfu": median_of(lambda f: f.mfu),
        "mfu_vs_probe": median_of(lambda f: f.mfu_vs_probe),
        "cpu_package_j": median_of(lambda f: f.energy_j.get("cpu_package_j")),
        "gpu_j": median_of(lambda f: f.energy_j.get("gpu_j")),
        "device_type": device_type,
        "devices": devices,
        "device_kind": kind,
        "device_name": name,
        "price_key": price[0] if price else None,
        "price_per_device_hour": per_hour,
        "cost_usd": median_of(lambda f: cost_usd(devices, f.train_time_s, per_hour)),
        "cost_to_target_usd": cost_usd(devices, time_to_target_s, per_hour),
        "num_samples": int(n) if (n := median_of(lambda f: f.num_samples)) is not None else None,
    }


def cost_sentence(configurations: Sequence[Any]) -> str | None:
    """The GPU-versus-CPU cost sentence for one workload's configurations, if both exist."""
    settings = [
        CostedSetting(
            label=c.label,
            device_type=c.device_type,
            devices=c.devices,
            price_key=c.price_key,
            price_per_device_hour=c.price_per_device_hour,
            cost_usd=c.cost_usd,
            cost_to_target_usd=c.cost_to_target_usd,
            num_samples=c.num_samples,
        )
        for c in configurations
        if c.price_per_device_hour is not None and c.devices
    ]
    return gpu_versus_cpu(settings)


def price_note(prices: PriceTable | None, configurations: Sequence[Any]) -> str | None:
    """Which price table the costs use, and which devices it had no price for."""
    if prices is None:
        return None
    when = f", as of {prices.as_of}" if prices.as_of else ""
    note = f"Costs use the price table {prices.origin}{when} ($ per device-hour x devices x clock)"
    missing = sorted(
        {
            c.device_kind or c.device_name or "an unknown GPU"
            for c in configurations
            # An emulation has no cost to price (one process standing in for N).
            if c.price_per_device_hour is None and not c.emulated
        }
    )
    if missing:
        note += f"; no price for: {', '.join(missing)} (add it to the table)"
    return note + "."
