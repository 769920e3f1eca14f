"""Runs of another results store brought into this one (`trainscale runs import`): a laptop's
runs beside a GPU server's, or each node's store gathered into one, so that one report,
comparison or simulation sees them all.

What is copied: every run that has ended (completed or failed, with its epochs and step
times), the sweeps and the probes, each row exactly as stored. A row whose id the store
already holds is left as it is (ids are random, so the same id is the same row, copied
before); a run still running in the other store is left out, since its end would be
written there, not here. All of it commits in one transaction, or nothing does.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainscale.errors import StoreError
from trainscale.results.schema import (
    SCHEMA_VERSION,
    missing_from_layout,
    read_schema_version,
    refuse_newer,
)
from trainscale.results.sqlite_file import connect_for_reading, open_read_only
from trainscale.results.store_file import StoreFile


@dataclass(frozen=True)
class ImportedRows:
    """What an import copied and what it left."""

    source: str
    store: str
    runs: int
    """Runs copied (with their epochs and step times)."""
    sweeps: int
    probes: int
    already_there: int
    """Runs of the source that the store already held, left as they were."""
    still_running: int
    """Runs still running in the source, left out."""
    completed_failed: int = 0
    """Runs the store held as failed that the source holds completed (a result saved aside
    when the store refused it): replaced by the completed run, and counted in `runs`."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as `trainscale runs import --json` prints it."""
        return asdict(self)


class StoreImport(StoreFile):
    """Copying the rows of another store into this one."""

    def import_from(self, source: str | os.PathLike[str]) -> ImportedRows:
        """Copy the ended runs, the sweeps and the probes of the store at `source` that this
        store does not hold yet. StoreError (one line) for a source that is missing, not a
        store, from a newer trainscale, or this store itself. The source is only read: a
        store of an older trainscale is brought up to date in a copy."""
        path = Path(source)
        check_source(path, self.path)
        with tempfile.TemporaryDirectory(prefix="trainscale-import-") as folder:
            # A snapshot, so that runs another process is writing there meanwhile do not
            # change what is copied halfway, and the copy can be attached to this store.
            snapshot = Path(folder) / "source.db"
            try:
                with (
                    closing(open_read_only(path)) as reader,
                    closing(sqlite3.connect(snapshot)) as copy,
                ):
                    reader.backup(copy)
            except (sqlite3.Error, OSError) as error:  # a full temporary folder, say
                raise StoreError(
                    f"cannot import {path}: its snapshot in {folder} could not be made "
                    f"({error}); free space there, or point TMPDIR elsewhere"
                ) from None
            with closing(connect_for_reading(snapshot)) as updated:  # an older layout
                missing = missing_from_layout(updated)  # is brought up to date in the copy
            if missing is not None:
                raise StoreError(damaged_source_message(path, missing))
            return self._copy_rows(snapshot, path)

    def _copy_rows(self, snapshot: Path, source: Path) -> ImportedRows:
        conn = self._write_connection()
        # SQLite attaches only outside a transaction: before `_write` begins one.
        conn.execute("ATTACH DATABASE ? AS source", (str(snapshot),))
        try:
            with self._write() as conn:
                counts = _copy(conn)
        finally:
            conn.execute("DETACH DATABASE source")
        return ImportedRows(str(source), str(self.path), **counts)


def check_source(source: Path, store: Path) -> None:
    """One line for a source that cannot be imported: missing, a directory, this store
    itself, not a store, or written by a newer trainscale. Callers check before they open
    (and so create) the store imported into: a mistyped source leaves no empty store."""
    if not source.exists():
        raise StoreError(f"cannot import {source}: no such file")
    if source.is_dir():
        raise StoreError(f"cannot import {source}: it is a directory, not a results store")
    if store.exists() and os.path.samefile(source, store):
        raise StoreError(f"cannot import {source}: it is the store being imported into")
    missing = None
    try:
        # Read as every reader does: a store on a read-only mount opens too (immutable).
        with closing(open_read_only(source)) as conn:
            version = read_schema_version(conn)
            refuse_newer(version)
            if version == SCHEMA_VERSION:  # an older layout is checked once updated
                missing = missing_from_layout(conn)
    except sqlite3.DatabaseError:
        version = None
    except StoreError as error:  # a newer trainscale's, or a damaged version mark
        raise StoreError(f"cannot import {source}: {error}") from None
    if version is None:
        raise StoreError(f"cannot import {source}: it is not a trainscale results store")
    if missing is not None:
        raise StoreError(damaged_source_message(source, missing))


def damaged_source_message(source: Path, missing: str) -> str:
    """The one line for a source store that lacks part of the layout (`missing`)."""
    return f"cannot import {source}: it is a damaged results store, its {missing} is missing"


def _columns(conn: sqlite3.Connection, table: str) -> str:
    """The store's columns of `table`, in order (the snapshot has the same schema)."""
    names = [row[1] for row in conn.execute(f"PRAGMA main.table_info({table})")]
    return ", ".join(names)


def _copy(conn: sqlite3.Connection) -> dict[str, int]:
    """Copy within the open transaction; the counts of what was copied and left."""
    conn.execute("DROP TABLE IF EXISTS temp.imported")
    # A run this store holds as failed whose result the source holds completed: the copy a
    # run saved its result in when this store refused it (full, read-only, locked) or was
    # replaced. The result is the run's truth; its row here goes (epochs and step times with
    # it, ON DELETE CASCADE) and the source's is copied in its place.
    completing = [
        row[0]
        for row in conn.execute(
            "SELECT run_id FROM source.runs WHERE status = 'completed' AND run_id IN "
            "(SELECT run_id FROM main.runs WHERE status = 'failed')"
        )
    ]
    conn.executemany("DELETE FROM main.runs WHERE run_id = ?", [(i,) for i in completing])
    conn.execute(
        "CREATE TEMP TABLE imported AS SELECT run_id FROM source.runs "
        "WHERE status != 'running' AND run_id NOT IN (SELECT run_id FROM main.runs)"
    )
    already = conn.execute(
        "SELECT COUNT(*) FROM source.runs WHERE run_id IN (SELECT run_id FROM main.runs)"
    ).fetchone()[0]
    running = conn.execute(
        "SELECT COUNT(*) FROM source.runs WHERE status = 'running' "
        "AND run_id NOT IN (SELECT run_id FROM main.runs)"
    ).fetchone()[0]
    counts = {}
    # Sweeps first: runs name their sweep. Table names are the store's own, not the user's.
    for table, key in (("sweeps", "sweep_id"), ("probes", "probe_id")):
        columns = _columns(conn, table)
        counts[table] = conn.execute(
            f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM source.{table} "
            f"WHERE {key} NOT IN (SELECT {key} FROM main.{table})"
        ).rowcount
    for table in ("runs", "epochs", "step_times"):
        columns = _columns(conn, table)
        copied = conn.execute(
            f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM source.{table} "
            "WHERE run_id IN (SELECT run_id FROM temp.imported)"
        ).rowcount
        if table == "runs":
            counts["runs"] = copied
    conn.execute("DROP TABLE temp.imported")
    return {
        **counts,
        "already_there": already,
        "still_running": running,
        "completed_failed": len(completing),
    }
