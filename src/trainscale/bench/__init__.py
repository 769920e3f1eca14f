"""`trainscale bench`: a ladder of settings on this machine, measured, stored and tabulated.

`ladder` plans the settings (serial baseline, threads, pinned workers, bf16, the naive
oversubscribed pitfall), `table` turns their results into rows and Markdown, and `run`
measures them end to end (`run_bench`).

Called, the package is the Python API's `trainscale.bench` (see trainscale/entry.py).
"""

from trainscale.bench.ladder import Rung, Skipped, plan_ladder
from trainscale.bench.run import BenchListener, BenchResult, run_bench
from trainscale.bench.table import RungResult, markdown_table, table_rows
from trainscale.entry import callable_package

__all__ = [
    "BenchListener",
    "BenchResult",
    "Rung",
    "RungResult",
    "Skipped",
    "markdown_table",
    "plan_ladder",
    "run_bench",
    "table_rows",
]

callable_package(__name__)
