"""The store argument every API function takes, and the runs read back from it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trainscale.api.results import StoredRun, StoredRuns
from trainscale.results.store import RunStore, default_store_path

StorePath = str | os.PathLike[str] | None
"""A results database; None: the CLI's default ($TRAINSCALE_STORE, else ./trainscale.db)."""


def store_file(store: StorePath) -> Path | None:
    """`store` as the library functions take it: a Path, or None for the default."""
    return Path(store) if store is not None else None


def stored_run(store: StorePath, run_id: str) -> StoredRun:
    """The run `run_id` as stored."""
    with RunStore(store_file(store) or default_store_path(), create=False) as opened:
        return StoredRun.from_record(opened.get_run(run_id))


def stored_runs(store: StorePath, **filters: Any) -> StoredRuns:
    """Runs by store filter (`tag=`, `sweep_id=`), in the order they were made."""
    with RunStore(store_file(store) or default_store_path(), create=False) as opened:
        records = opened.list_runs(**filters)
    return StoredRuns(tuple(StoredRun.from_record(r) for r in reversed(records)))
