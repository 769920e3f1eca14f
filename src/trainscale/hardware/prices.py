"""Prices of devices by the hour: a user-editable table (TOML; `default_prices.toml`, shipped
with trainscale as an example; ``$TRAINSCALE_PRICES`` or ``--prices FILE`` replaces it as a
whole), read by `price_file.py`. What a run costs is metrics/cost.py's arithmetic on these
prices. The table itself needs nothing beyond the standard library: the reports that take
one are imported by every command, `trainscale run` included, which then needs no pydantic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainscale.errors import ConfigError
from trainscale.metrics.cost import CPU_CORE


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
