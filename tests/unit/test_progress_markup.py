"""Progress lines print the text of users and libraries as it is: a run's failure reason, a
label or a sweep name may hold [brackets], which rich would read as markup (and stop the
command with a MarkupError at a closing tag such as [/data/x])."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from trainscale.cli.bench_progress import Progress as BenchProgress
from trainscale.cli.sweep_progress import SweepProgress

BRACKETS = "expected input[batch, 4] got [/data/x] [bold]"


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=400, color_system=None), out


def test_a_sweep_prints_labels_and_failures_as_text():
    console, out = _console()
    progress = SweepProgress(console)
    progress.start("abcdef0123", todo=2, done=0)
    planned = SimpleNamespace(label=f"in {BRACKETS}", repeat=0)
    progress.run_started(planned)
    progress.run_finished(planned, None, BRACKETS)
    progress.stop()
    assert f"failed: in {BRACKETS} (repeat 0): {BRACKETS}" in out.getvalue()


def test_a_bench_prints_a_failure_as_text():
    console, out = _console()
    BenchProgress(console).rung_failed(SimpleNamespace(name="2 workers"), BRACKETS)
    assert f"2 workers failed: {BRACKETS}" in out.getvalue()
