"""The store argument every API function takes, and the runs read back from it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trainscale.api.results import StoredRun, StoredRuns
from trainscale.api.workload_arg import workload_text
from trainscale.errors import ConfigError
from trainscale.reporting.listing import check_run_filters, stored_name
from trainscale.results.store import RunStore, default_store_path

StorePath = str | os.PathLike[str] | None
"""A results database; None: the CLI's default ($TRAINSCALE_STORE, else ./trainscale.db)."""


def store_file(store: StorePath) -> Path | None:
    """`store` as the library functions take it: a Path, or None for the default."""
    return Path(store) if store is not None else None


def stored_id(side: Any, function: str = "", name: str = "") -> str:
    """The id the CLI takes for a run or sweep: a string as given, or the id of an API
    result (a `StoredRun`'s `run_id`, a `SweepResults`' `sweep_id`). Anything else is a
    ConfigError naming `trainscale.FUNCTION()`'s `name` (an int would be read as an id's
    prefix, a list of runs as its text)."""
    if isinstance(side, str):
        return side
    for attribute in ("run_id", "sweep_id"):
        value = getattr(side, attribute, None)
        if isinstance(value, str):
            return value
    raise ConfigError(
        f"trainscale.{function}() {name}: must be a run or sweep id (a str), a StoredRun or "
        f"a SweepResults, got {side!r:.80}"
    )


def stored_ids(runs: Any, function: str, name: str = "runs") -> list[str]:
    """The run ids of `runs`: one run (an id or a `StoredRun`, not the letters of its id)
    or an iterable of them (a `StoredRuns`)."""
    if isinstance(runs, str) or hasattr(runs, "run_id"):
        runs = [runs]
    return [stored_id(item, function, name) for item in runs]


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
    check_run_filters(status, limit)
    # As `runs list --workload` reads it: a script is never imported (that would run it),
    # a stored name is taken as it is.
    return None if workload is None else stored_name(workload_text(workload))
