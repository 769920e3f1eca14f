"""`trainscale bench`: a ladder of settings on this machine, measured, stored and tabulated.

`ladder` plans the settings (serial baseline, threads, pinned workers, bf16, the naive
oversubscribed pitfall), `table` turns their results into rows and Markdown, and `run`
measures them end to end (`run_bench`).
"""

from trainscale.benchmark.ladder import Rung, Skipped, plan_ladder
from trainscale.benchmark.run import BenchListener, BenchResult, run_bench
from trainscale.benchmark.table import RungResult, markdown_table, table_rows

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
