"""The store argument every API function takes, and the runs read back from it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trainscale.api.results import StoredRun, StoredRuns
from trainscale.api.workload_arg import workload_text
from trainscale.errors import ConfigError
from trainscale.results.schema import RUN_STATUSES
from trainscale.results.store import RunStore, default_store_path
from trainscale.workloads import workload_name

StorePath = str | os.PathLike[str] | None
"""A results database; None: the CLI's default ($TRAINSCALE_STORE, else ./trainscale.db)."""


def store_file(store: StorePath) -> Path | None:
    """`store` as the library functions take it: a Path, or None for the default."""
    return Path(store) if store is not None else None


def stored_id(side: Any) -> str:
    """The id the CLI takes for a run or sweep: a string as given, or the id of an API
    result (a `StoredRun`'s `run_id`, a `SweepResults`' `sweep_id`)."""
    for attribute in ("run_id", "sweep_id"):
        value = getattr(side, attribute, None)
        if isinstance(value, str) and not isinstance(side, str):
            return value
    return str(side)


def stored_run(store: StorePath, run_id: str) -> StoredRun:
    """The run `run_id` as stored."""
    with RunStore(store_file(store) or default_store_path(), create=False) as opened:
        return StoredRun.from_record(opened.get_run(run_id))


def stored_runs(store: StorePath, **filters: Any) -> StoredRuns:
    """Runs by store filter (`tag=`, `sweep_id=`), in the order they were made."""
    with RunStore(store_file(store) or default_store_path(), create=False) as opened:
        records = opened.list_runs(**filters)
    return StoredRuns(tuple(StoredRun.from_record(r) for r in reversed(records)))


def checked_filters(workload: Any, status: str | None, limit: int | None) -> str | None:
    """Check the filters `runs` and `delete_runs` take (a ConfigError line for a status or
    limit there cannot be) and return the workload's name as stored: a custom workload's
    reference or function is named by its name."""
    if status is not None and status not in RUN_STATUSES:
        raise ConfigError(f"status must be one of {', '.join(RUN_STATUSES)}; got {status!r}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a whole number >= 1, got {limit!r}")
    return None if workload is None else workload_name(workload_text(workload))
