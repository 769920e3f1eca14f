"""A price file (TOML) read into a `prices.PriceTable`: the file's model, and which file is in
use (``--prices FILE``, else ``$TRAINSCALE_PRICES``, else the packaged example)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from trainscale.config.files import Expect, TomlFile, read_toml, validate
from trainscale.hardware.prices import PriceError, PriceTable

PRICES_ENV_VAR = "TRAINSCALE_PRICES"
DEFAULT_PRICES = Path(__file__).with_name("default_prices.toml")


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
