"""Printing tables to standard output with rich: on a terminal as rich draws them; piped, as
plain aligned columns without colour, box characters or trailing padding.

One rule for every table: no word is ever cut. Piped output is wide (`PLAIN_WIDTH`, not the
80 columns rich assumes without a terminal); on a narrow terminal a cell wraps at spaces and
a word longer than its column folds onto the next line (`uncut`), never `config…`."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

STATUS_STYLES = {"completed": "green", "running": "yellow", "failed": "red"}
"""The colour of a run's status."""

PLAIN_WIDTH = 240
"""Width of piped output: wide enough that tables never wrap (rich only pads a table to its
own width)."""


class StdoutConsole(Console):
    """A console on standard output whose reader going away (`| head -1`) ends the command
    like the rest of its output: rich would exit with status 1 of its own accord; the
    BrokenPipeError reaches `cli.main`, which exits 141 without a word."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to write: the reader is gone
        raise BrokenPipeError


def stdout_console(plain_width: int = PLAIN_WIDTH, emoji: bool = False) -> Console:
    """A console for standard output, markup off: tags, errors, labels and config values may
    contain [brackets] that are not markup."""
    if sys.stdout.isatty():
        return StdoutConsole(markup=False, highlight=False)
    return StdoutConsole(
        file=sys.stdout,
        width=plain_width,
        color_system=None,
        markup=False,
        highlight=False,
        emoji=emoji,
    )


def table_console(markup: bool = True) -> Console:
    """A console for tables and lines on standard output: the terminal's width on a terminal;
    piped, `PLAIN_WIDTH` columns without colour, so no table is squeezed to 80 columns."""
    if sys.stdout.isatty():
        return StdoutConsole(markup=markup, highlight=False)
    return StdoutConsole(
        file=sys.stdout, width=PLAIN_WIDTH, color_system=None, markup=markup, highlight=False
    )


def uncut(table: Table) -> Table:
    """`table` with every column folding a word too long for it onto the next line, where
    rich would cut it with an ellipsis; headers included. Returns the same table."""
    for column in table.columns:
        column.overflow = "fold"
    return table


def emit(console: Console, *renderables: Any) -> None:
    """Print to the terminal, or (piped) as plain lines without rich's trailing cell padding."""
    if console.is_terminal:
        console.print(*renderables, sep="\n")
        return
    with console.capture() as capture:
        console.print(*renderables, sep="\n")
    lines = capture.get().splitlines()
    sys.stdout.write("".join(line.rstrip() + "\n" for line in lines))


def emit_unsquashed(console: Console, table: Table) -> None:
    """Print a table of numbers and ids at its natural width, even past the terminal's."""
    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    if natural > console.width:
        # Rich would squash or drop columns to fit, and a cut run id cannot be pasted into
        # `runs show`: a terminal that wraps long lines loses nothing.
        console.width = natural
    emit(console, table)


def column_table(
    console: Console, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]
) -> Table:
    """`rows` under the (header, justify) `columns`, cells never wrapped: a light box on a
    terminal, none when piped."""
    if console.is_terminal:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    else:
        table = Table(box=None, pad_edge=False, show_edge=False)
    for header, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*row)
    return table


def key_value_table(console: Console, values: dict[str, str]) -> Table:
    """Two columns, key and value, no header: one fact per line."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("key", style="dim" if console.is_terminal else "", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in values.items():
        table.add_row(key, value)
    return table


def status_cell(text: str, status: str) -> Text:
    """`text` in the colour of the run status `status`."""
    return Text(text, style=STATUS_STYLES.get(status, ""))
