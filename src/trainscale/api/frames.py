"""Results as pandas DataFrames. pandas is optional (`pip install 'trainscale[pandas]'`):
it is imported only when a DataFrame is asked for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trainscale.errors import ConfigError

PANDAS_MISSING = (
    "to_dataframe() needs pandas, which is not installed: pip install pandas "
    "(or pip install 'trainscale[pandas]')"
)


def data_frame(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> Any:
    """A DataFrame of `rows` with `columns` in this order (None for a missing cell)."""
    try:
        import pandas
    except ImportError:
        raise ConfigError(PANDAS_MISSING) from None
    return pandas.DataFrame([[row.get(c) for c in columns] for row in rows], columns=columns)


def scalar_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row whose lists become cells: a pair of numbers (an interval) two columns
    `KEY_low` and `KEY_high`, other lists their items joined ('; ' for text)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, (list, tuple)):
            if len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
                out[f"{key}_low"], out[f"{key}_high"] = value
            else:
                out[key] = "; ".join(map(str, value))
        elif isinstance(value, dict):
            for inner, item in value.items():
                out[f"{key}_{inner}"] = item
        else:
            out[key] = value
    return out
