"""CSV writing shared by `runs export --format csv` and the report's report.csv.

Both files hold strings a user typed (a `--tag`, a sweep's configuration labels, a run's
error) and are meant to be opened in spreadsheets. A spreadsheet reads a cell that starts
with `=`, `+`, `-` or `@` (or a tab or carriage return before one) as a formula, so a tag such
as `=HYPERLINK("http://x","y")` would become a live link or worse. Following OWASP's
guidance on CSV injection, such text cells get a leading single quote, which spreadsheets
show as text. Numbers are written as they are: a negative number stays a number.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet treat a text cell as a formula."""


def csv_cell(value: Any) -> Any:
    """`value` as a safe CSV cell: '' for None, a quote-prefixed string where a spreadsheet
    would see a formula, anything else (numbers, booleans) unchanged."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_TRIGGERS):
        return "'" + value
    return value


def write_csv(out: TextIO, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """A header over `columns`, then one line per row, every cell through `csv_cell`."""
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: csv_cell(value) for key, value in row.items()})
