"""The user's script a bench measures (`trainscale bench SCRIPT.py -- ARGS`), as the bench's
result names it; the runs themselves are `script_bench`'s, which `trainscale --help` does not
load (it imports torch)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ScriptTarget:
    """The script a bench measures and its own arguments (its `sys.argv[1:]`)."""

    script: str
    args: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The name its runs are stored under: `script:train.py`."""
        return f"script:{Path(self.script).name}"


def batch_text(sizes: Sequence[int]) -> str:
    """The global batches the rungs measured, for the bench's Markdown: the script's own,
    which may grow with the workers (a per-process batch under DistributedSampler)."""
    distinct = sorted(set(sizes))
    if not distinct:
        return "the script's own (no rung completed)"
    if len(distinct) == 1:
        return f"the script's own: {distinct[0]} on every rung"
    return (
        f"the script's own: {', '.join(map(str, distinct))} by rung (samples per step over "
        "all workers; the speedups compare throughput, not one optimisation)"
    )
