"""What a run costs: device-hours times a price per device-hour from a user-editable table.

    cost of a run       = devices x training clock (h) x price per device-hour
    cost to the target  = devices x time to target (h) x price per device-hour

Devices are GPUs for a GPU run and cores (vCPUs) for a CPU run; the training clock is the
methodology's (evaluation and start-up excluded). A GPU's hourly price is far higher than a
core's, and yet the GPU run can cost less, because it finishes sooner: these figures show it.

The price table is TOML (see `default_prices.toml`, shipped with trainscale as an example):
``$TRAINSCALE_PRICES`` or ``--prices FILE`` replaces it as a whole.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from trainscale.config.files import Expect, TomlFile, load_toml, validate
from trainscale.errors import ConfigError

PRICES_ENV_VAR = "TRAINSCALE_PRICES"
DEFAULT_PRICES = Path(__file__).with_name("default_prices.toml")
CPU_CORE = "cpu-core"
"""Price key of one CPU core (vCPU) for one hour."""


class PriceError(ConfigError):
    """A price file that cannot be read or has a bad entry (the message names the key)."""


@dataclass(frozen=True)
class PriceTable:
    """Dollars per device-hour by device kind or device name."""

    prices: Mapping[str, float]
    origin: str
    """Where the table came from: a file path, or 'default (...)'."""
    as_of: str | None = None
    source: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def price(self, *keys: str | None) -> tuple[str, float] | None:
        """(key, price) of the first of `keys` the table has, or None."""
        for key in keys:
            if key and key in self.prices:
                return key, self.prices[key]
        return None

    def price_for_gpu_name(self, gpu_name: str | None) -> tuple[str, float] | None:
        """A price whose key is a whole word of a GPU name not in the peak table ('L4')."""
        if not gpu_name:
            return None
        words = set(re.findall(r"[A-Za-z0-9]+", gpu_name.upper()))
        for key, value in self.prices.items():
            if key != CPU_CORE and key.upper() in words:
                return key, value
        return None


class PriceFile(TomlFile):
    """A price file as written (see `default_prices.toml`)."""

    file_kind = "price file"
    error = PriceError

    as_of: Annotated[str, Expect("text")] | None = None
    source: Annotated[str, Expect("text")] | None = None
    notes: Annotated[str, Expect("text")] | None = None
    prices: Annotated[
        dict[
            str,
            Annotated[
                float,
                Field(ge=0, allow_inf_nan=False),
                Expect("a number of dollars per hour, finite and >= 0"),
            ],
        ],
        Expect("a table of dollars per device-hour ([prices])"),
    ]
    """Dollars per device-hour by device kind, device name or `cpu-core`."""

    def table(self, origin: str) -> PriceTable:
        """The price table this file gives; `origin` says where it came from."""
        return PriceTable(
            prices=dict(self.prices),
            origin=origin,
            as_of=self.as_of,
            source=self.source,
            meta={"notes": self.notes} if self.notes is not None else {},
        )


def parse_price_table(raw: Mapping[str, Any], origin: str) -> PriceTable:
    """Validate a parsed price file; PriceError naming the offending key otherwise."""
    return validate(raw, PriceFile, f"price file {origin}").table(origin)


def load_price_table(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """The price table in use: `path`, else ``$TRAINSCALE_PRICES``, else the packaged example."""
    chosen = path if path is not None else (os.environ.get(PRICES_ENV_VAR, "").strip() or None)
    file = Path(chosen).expanduser() if chosen is not None else DEFAULT_PRICES
    origin = str(file) if chosen is not None else "default (example prices)"
    return load_toml(file, PriceFile).table(origin)


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
        if gpu is None or cpu is None:
            continue
        gpu_cost, cpu_cost = measure(gpu), measure(cpu)
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
