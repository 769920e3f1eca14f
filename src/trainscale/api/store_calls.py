"""The store's own calls: another store's runs imported into this one, and runs deleted, as
`trainscale runs import` and `trainscale runs delete` do."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainscale.api.keywords import check_arguments
from trainscale.api.results import StoredRun, StoredRuns
from trainscale.api.stored import StorePath, checked_filters, store_file, stored_ids
from trainscale.errors import ConfigError
from trainscale.reporting.listing import open_for_reading, select_runs
from trainscale.results.store import RunStore, default_store_path
from trainscale.results.store_import import ImportedRows, check_source


def import_runs(
    source: str | os.PathLike[str], *, store: StorePath = None, **unknown: Any
) -> ImportedRows:
    """Copy the ended runs of the store at `source` (another machine's trainscale.db, say),
    with their epochs and step times, and its sweeps and probes into `store`, as
    `trainscale runs import SOURCE` does; return what was copied and left.

    Runs `store` already holds (the same id) are left as they are, so importing twice copies
    nothing twice; runs still running there are left out. All of it is copied, or nothing
    is. A source that is missing, not a store, from a newer trainscale or `store` itself
    raises StoreError (one line); the source is only read."""
    check_arguments("import_runs", {"source": source, "store": store, **unknown}, (import_runs, ()))
    path = store_file(store) or default_store_path()
    check_source(Path(source), path)  # before the store is made: a typo makes none
    with RunStore(path) as opened:
        return opened.import_from(source)


def delete_runs(
    runs: Iterable[Any] | StoredRun | None = None,
    *,
    workload: Any = None,
    status: str | None = None,
    tag: str | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    store: StorePath = None,
    **unknown: Any,
) -> StoredRuns:
    """Delete the runs named in `runs` (an id, a unique prefix or a `StoredRun`, or several:
    a `StoredRuns` as `trainscale.runs()` returns it), or else those matching every filter
    given, with their epochs and step times, in one transaction, as `trainscale runs delete
    --yes` does; return them as they were stored. `dry_run=True` returns them and deletes
    nothing.

    Naming no run and no filter is a ConfigError, as are ids together with filters; a run
    still running is refused (StoreError) and nothing is deleted. A sweep keeps its plan:
    `trainscale.sweep(..., resume=...)` makes its deleted runs again."""
    given = {"runs": runs, "workload": workload, "status": status, "tag": tag, "limit": limit}
    given.update(dry_run=dry_run, store=store)
    check_arguments("delete_runs", {**given, **unknown}, (delete_runs, ()))
    run_ids = [] if runs is None else stored_ids(runs, "delete_runs", "option runs")
    if runs is not None and not run_ids:
        raise ConfigError("trainscale.delete_runs() was given no run to delete: runs is empty")
    filtered = any(value is not None for value in (workload, status, tag, limit))
    if run_ids and filtered:  # a named run that a filter left out would vanish unsaid
        raise ConfigError(
            "trainscale.delete_runs() takes runs or the filters (workload, status, tag, "
            "limit), not both"
        )
    if not run_ids and not filtered:
        raise ConfigError(
            "trainscale.delete_runs() deletes nothing unless told which: give runs, or "
            "workload, status, tag or limit"
        )
    workload = checked_filters(workload, status, limit)
    with open_for_reading(store_file(store)) as opened:
        chosen = select_runs(opened, run_ids, workload, status, tag, limit)
        deleted = StoredRuns(tuple(StoredRun.from_record(record) for record in chosen))
        if not dry_run:
            opened.delete_runs([run.run_id for run in deleted])
    return deleted
