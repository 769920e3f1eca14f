"""Property: a custom workload file that exits, forks, prints, hangs or leaves work behind
ends `trainscale run` within a bound, with one line on stderr and no run lost or left
`running`.

The files come from a small grammar: a behaviour (sys.exit, os._exit, os.fork, print, a
sleep, a non-daemon thread, a sleeping atexit hook) put at one place (the file's import, the
factory, the model's forward). Each case is a real `trainscale run` of a tiny workload in a
subprocess of its own (os._exit at import would end pytest itself), so only a chosen few of
the combinations run by default; `TRAINSCALE_FUZZ_ALL=1` runs every one.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.custom_workloads import tiny_workload

BOUND_S = 60.0
"""A tiny run takes seconds (tens on a loaded machine); a case still going after this hangs."""
LINGER_BOUND_S = 30.0
"""For what is left behind after the run (a thread, an atexit hook): the run itself is done
in seconds, so waiting longer only makes the failing case slower."""

BEHAVIOURS = {
    "sys.exit(0)": "import sys; sys.exit(0)",
    "sys.exit('bye')": "import sys; sys.exit('bye')",
    "os._exit(0)": "import os; os._exit(0)",
    "os._exit(3)": "import os; os._exit(3)",
    "fork": "import os; os.fork() == 0 and os._exit(0)",
    "print": "print('noise from the workload')",
    "thread": (
        "import threading, time; "
        "threading.Thread(target=time.sleep, args=(600,), daemon=False).start()"
    ),
    "atexit": "import atexit, time; atexit.register(time.sleep, 600)",
    "hang": "import os, time; os.environ.get('RANK') == '1' and time.sleep(600)",
}
PLACES = ("import", "factory", "forward")

CHOSEN = [
    ("sys.exit('bye')", "import"),
    ("os._exit(3)", "forward"),
    ("fork", "forward"),
    ("print", "forward"),
    ("hang", "forward"),
]
"""The combinations run by default: a behaviour where it does the most harm, for those the
tests of each fix do not already run end to end (`sys.exit(0)` and `os._exit(0)` in forward,
a thread left at import: tests/cli/test_workload_failures_cli.py, test_workload_exit_cli.py,
test_exit_deadline_cli.py; an exit hook: tests/unit/test_exit_deadline.py)."""

BROKEN_TODAY: dict[tuple[str, str], str] = {}
"""Combinations that fail today, each with why (marked xfail, strict: a fix shows up)."""


def _cases() -> list[object]:
    wanted = (
        list(itertools.product(BEHAVIOURS, PLACES))
        if os.environ.get("TRAINSCALE_FUZZ_ALL")
        else CHOSEN
    )
    cases: list[object] = []
    for behaviour, place in wanted:
        marks = []
        if (behaviour, place) in BROKEN_TODAY:
            marks.append(pytest.mark.xfail(strict=True, reason=BROKEN_TODAY[(behaviour, place)]))
        cases.append(pytest.param(behaviour, place, marks=marks, id=f"{behaviour}@{place}"))
    return cases


def write_workload(directory: Path, behaviour: str, place: str) -> Path:
    """A tiny custom workload with `behaviour`'s code at `place`."""
    code = BEHAVIOURS[behaviour]
    if place == "forward":
        return tiny_workload(directory, "odd", forward=f"{code}\n        return self.fc(x)")
    path = tiny_workload(directory, "odd")
    text = path.read_text()
    if place == "import":
        text = f"{code}\n{text}"
    else:
        text = text.replace("def make_workload():\n", f"def make_workload():\n    {code}\n")
    path.write_text(text)
    return path


def run_bounded(argv: list[str], cwd: Path, bound_s: float) -> tuple[int | None, str, str, float]:
    """Run `argv` in a session of its own; (exit status or None past the bound, stdout,
    stderr, seconds). Past the bound the whole process group is killed."""
    env = {**os.environ, "TRAINSCALE_CACHE_DIR": str(cwd / "cache"), "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so a leftover child is killed with it
    )
    try:
        out, err = process.communicate(timeout=bound_s)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        code = None
    return code, out, err, time.monotonic() - started


def stored_statuses(store: Path) -> list[str]:
    """The status of every run in `store` ([] when it was never made)."""
    if not store.is_file():
        return []
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return [row[0] for row in db.execute("SELECT status FROM runs")]


@pytest.mark.parametrize(("behaviour", "place"), _cases())
def test_a_misbehaving_workload_file_ends_in_bound_with_one_line(
    behaviour: str, place: str, tmp_path: Path
) -> None:
    path = write_workload(tmp_path, behaviour, place)
    store = tmp_path / "runs.db"
    argv = [sys.executable, "-m", "trainscale", "run", f"{path}:make_workload"]
    argv += ["--steps", "6", "--no-eval", "--quiet", "--json", "--store", str(store)]
    if behaviour == "hang":  # rank 1 goes silent; rank 0 gives up on it
        argv += ["--workers", "2", "--timeout", "10"]
    bound = LINGER_BOUND_S if behaviour in ("thread", "atexit") else BOUND_S
    code, out, err, seconds = run_bounded(argv, tmp_path, bound)
    shown = f"{behaviour} at {place}: exit {code} after {seconds:.1f}s; stderr: {err!r}"
    assert code is not None, shown
    assert "Traceback" not in err, shown
    statuses = stored_statuses(store)
    assert "running" not in statuses, (shown, statuses)
    if code == 0:  # the workload's noise is allowed on stderr; stdout stays one document
        assert json.loads(out)["status"] == "completed", shown
        assert statuses == ["completed"], (shown, statuses)
        return
    noise = "noise from the workload"
    lines = [line for line in err.splitlines() if line.strip() and noise not in line]
    assert len(lines) == 1, shown
    if code == 2:  # the file could not be loaded: nothing started, nothing stored
        assert statuses == [], (shown, statuses)
    else:
        assert code == 1, shown
        assert statuses == ["failed"], (shown, statuses)
