"""Prices of devices by the hour: a user-editable table (TOML; `default_prices.toml`, shipped
with trainscale as an example; ``$TRAINSCALE_PRICES`` or ``--prices FILE`` replaces it as a
whole). What a run costs is metrics/cost.py's arithmetic on these prices.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from trainscale.config.files import Expect, TomlFile, read_toml, validate
from trainscale.errors import ConfigError
from trainscale.metrics.cost import CPU_CORE

PRICES_ENV_VAR = "TRAINSCALE_PRICES"
DEFAULT_PRICES = Path(__file__).with_name("default_prices.toml")


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
    return parse_price_table(read_toml(file, PriceFile.file_kind, PriceFile.error), origin)
