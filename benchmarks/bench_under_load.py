"""`trainscale bench` on a quiet machine and again with one core kept busy: do the verdicts agree?

    python benchmarks/bench_under_load.py
    python benchmarks/bench_under_load.py --bench-args "--quick --rounds 5 --steps 100"

Runs the bench twice in one invocation: first as the machine is, then with a CPU-burning
process (a Python busy loop) pinned to the last usable core for the whole second bench. For
every rung it sets the two verdicts side by side. The rule the bench must keep: the busy
bench agrees with the quiet one, or says it cannot tell ("not trusted: busy machine", "no
difference measurable here"); it never gives a confident opposite verdict ("faster" where
the quiet bench found "slower", or the reverse). Both tables and the comparison are written
to the JSON file.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_json  # noqa: E402

BURN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"
CONFIDENT = ("faster", "slower")


def bench(args: list[str], folder: Path, name: str) -> str:
    """Run one bench; its Markdown table's text."""
    out = folder / f"{name}.md"
    cmd = [sys.executable, "-m", "trainscale", "bench", *args]
    cmd += ["--store", str(folder / f"{name}.db"), "--out", str(out)]
    print("$", " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True)
    return out.read_text()


def verdicts(table: str) -> dict[str, str]:
    """Rung name -> verdict cell, from the bench's Markdown table."""
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    headers = [cell.strip() for cell in lines[0].strip("|").split("|")]
    out = {}
    for line in lines[1:]:
        cells = dict(zip(headers, (c.strip() for c in line.strip("|").split("|")), strict=False))
        out[cells["setting"]] = cells.get("verdict", "-")
    return out


def direction(verdict: str) -> str | None:
    """'faster' / 'slower' for a confident verdict, None for anything else."""
    if verdict.startswith(("cannot tell", "not trusted")) or "no difference" in verdict:
        return None
    return next((word for word in CONFIDENT if re.search(rf"\b{word}\b", verdict)), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench-args", default="--quick --rounds 5 --steps 100")
    parser.add_argument("--out", default="benchmarks/results/bench_under_load.json")
    args = parser.parse_args()
    bench_args = shlex.split(args.bench_args)
    folder = Path(tempfile.mkdtemp())
    quiet = bench(bench_args, folder, "quiet")
    core = max(os.sched_getaffinity(0))
    burner = subprocess.Popen([sys.executable, "-c", BURN, str(core)])
    try:
        busy = bench(bench_args, folder, "busy")
    finally:
        burner.kill()
        burner.wait()
    quiet_v, busy_v = verdicts(quiet), verdicts(busy)
    rows, contradictions = [], 0
    for rung in quiet_v:
        a, b = quiet_v[rung], busy_v.get(rung, "-")
        da, db = direction(a), direction(b)
        if db is None:
            outcome = "busy bench cannot tell" if da else "agree (neither tells)"
        elif da == db:
            outcome = "agree"
        elif da is None:
            outcome = "busy bench confident, quiet bench not"
        else:
            outcome = "CONTRADICTION"
            contradictions += 1
        rows.append({"setting": rung, "quiet": a, "busy": b, "outcome": outcome})
        print(f"{rung:42s} quiet: {a:34s} busy (core {core} burnt): {b:34s} {outcome}")
    print(f"confident opposite verdicts: {contradictions}")
    write_json(
        Path(args.out),
        {
            "command": " ".join(sys.argv),
            "busy_core": core,
            "quiet_table": quiet,
            "busy_table": busy,
            "rows": rows,
            "contradictions": contradictions,
        },
    )


if __name__ == "__main__":
    main()
