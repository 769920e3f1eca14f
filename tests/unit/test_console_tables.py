"""Tables never cut a word: piped output is wide, and on a narrow terminal a cell wraps and a
long word folds onto the next line instead of ending in an ellipsis."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainscale.cli.console import PLAIN_WIDTH, table_console, uncut

from tests.helpers.cli import run_cli

WORDS = ["configuration_hash_abcdef", "Oversubscription", "throughput", "(--quick)"]


def _table() -> Table:
    table = Table(title="t")
    for header in ("name", "configuration", "Oversubscribed workers", "accuracy", "runs"):
        table.add_column(header)
    table.add_row("cpu-parallel", WORDS[0], f"{WORDS[1]} pitfall", f"no: {WORDS[2]} only",
                  f"12 runs {WORDS[3]}")  # fmt: skip
    return table


def test_a_narrow_terminal_wraps_and_folds_never_cuts():
    cut = Console(width=80, color_system=None)
    with cut.capture() as capture:
        cut.print(_table())
    assert "…" in capture.get()  # what rich does on its own at 80 columns
    console = Console(width=80, color_system=None)
    with console.capture() as capture:
        console.print(uncut(_table()))
    text = capture.get()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    # A word wider than its column is all there, folded over lines.
    narrow = Table(box=None, show_header=False, pad_edge=False)
    narrow.add_column("x", width=10)
    narrow.add_row(WORDS[0])
    with console.capture() as capture:
        console.print(uncut(narrow))
    lines = capture.get().split()
    assert "".join(lines) == WORDS[0] and len(lines) == 3


def test_piped_tables_are_wide(capsys):
    console = table_console()
    assert not console.is_terminal and console.width == PLAIN_WIDTH
    console.print(uncut(_table()))
    out = capsys.readouterr().out
    assert "…" not in out
    assert "Oversubscribed workers" in out  # the header on one line


def test_recipes_piped_cut_no_word(capsys):
    assert run_cli(["recipes"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert "cpu-parallel" in out
