"""The results store's file: its connections, its transactions, its damaged rows.

`StoreFile` is what every kind of stored row is read and written through (`RunStore` and
the tables beside it, `SweepRows` and `ProbeRows`): one connection for reading, short
write transactions opened with `BEGIN IMMEDIATE` (two writers queue instead of failing),
a write refused when the file was deleted or replaced while open, and listings that leave
out, and name once, a row whose JSON cannot be read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from trainscale.errors import StoreError
from trainscale.results.records import DamagedRecordError, DamagedRow
from trainscale.results.sqlite_file import (
    connect,
    connect_for_reading,
    file_identity,
    open_connection,
)

log = logging.getLogger("trainscale.results.store")
_Record = TypeVar("_Record")
_Opened = TypeVar("_Opened", bound="StoreFile")


class StoreUnwritable(StoreError):
    """The store refused a write: locked past the busy timeout, a read-only file, a full
    disk. The environment's doing, not the caller's: a result can be kept in a copy."""


class StoreFile:
    """An open results store file; use as a context manager."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        """Open (and with `create`, create) the store at `path`.

        Raises StoreError naming the path when it cannot be used: a missing parent directory,
        a directory, a file that is not SQLite, a store from a newer trainscale, or (with
        create=False) no file at all.

        create=False opens for reading: through a connection that cannot change the file
        (SQLite's mode=ro, or query_only where the file is writable; see
        `sqlite_file.open_read_only`), so a store on a read-only mount or of another user
        can be read, and a file that is not a store is refused, never turned into one. A
        write through such a store (marking stale runs; migrating an older schema) opens its
        own read-write connection, which never creates the file, and fails as any write does
        where the file is not writable.
        """
        self.path = Path(path)
        self._read_only = not create
        self._conn: sqlite3.Connection | None = (
            connect(self.path, create=True) if create else connect_for_reading(self.path)
        )
        self._writer: sqlite3.Connection | None = None
        # Which file was opened: a connection keeps writing into it even once the path is
        # deleted or replaced, where what is written would be lost (see `_moved`).
        self._identity = file_identity(self.path)
        self._left_out: dict[tuple[str, str], DamagedRow] = {}

    @property
    def left_out(self) -> list[DamagedRow]:
        """The damaged rows that listings of this store have left out so far, in the order
        they were met (each once)."""
        return list(self._left_out.values())

    # -- lifetime -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; calling it twice is harmless."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self: _Opened) -> _Opened:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    # -- plumbing -----------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"results store {self.path} is closed")
        return self._conn

    def _moved(self) -> str | None:
        """Why the path no longer names the file this store opened (deleted, or another
        file put in its place), or None while it does, or where that cannot be told."""
        now = file_identity(self.path)
        if now is None and self.path.exists():
            return None  # cannot stat it (permissions): the write itself will tell
        if now is None:
            return f"results store {self.path} was deleted while it was open"
        if self._identity is not None and now != self._identity:
            return f"results store {self.path} was replaced by another file while it was open"
        return None

    def _save_copy(self) -> Path:
        """Copy the database this store has open (still readable through the connection,
        even deleted) to a new file beside the path, else in the temporary directory;
        returns it. StoreError if no copy can be written anywhere."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        name = f"{self.path.stem}.saved-{stamp}-{uuid.uuid4().hex[:6]}.db"
        problems = []
        for folder in (self.path.parent, Path(tempfile.gettempdir())):
            target = folder / name
            try:
                with closing(sqlite3.connect(target)) as copy:
                    self._connection().backup(copy)
                return target
            except (sqlite3.Error, OSError) as error:
                problems.append(f"{target}: {error}")
                with contextlib.suppress(OSError):
                    target.unlink()
        raise StoreError(
            f"no copy of results store {self.path} could be saved ({'; '.join(problems)})"
        )

    def _write_connection(self) -> sqlite3.Connection:
        """The connection writes go through: the store's own, or for a store opened for
        reading, a read-write one opened on the first write (sqlite3.OperationalError where
        the file cannot be opened so)."""
        conn = self._connection()
        if not self._read_only:
            return conn
        if self._writer is None:
            self._writer = open_connection(self.path, "rw")
        return self._writer

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it commits, or none of it (rollback on any error)."""
        moved = self._moved()
        if moved is not None:
            raise StoreError(f"cannot write results store {self.path}: {moved}")
        try:
            conn = self._write_connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as error:
            # Locked past the timeout, read-only file, full disk: the user's environment,
            # not a bug. Other sqlite errors (bad values, constraint violations) are bugs.
            raise StoreUnwritable(f"cannot write results store {self.path}: {error}") from None

    def _readable(
        self,
        sql: str,
        params: Sequence[Any],
        parse: Callable[[sqlite3.Row], _Record],
        limit: int | None,
    ) -> list[_Record]:
        """The rows of a listing query as records, at most `limit` of them, leaving out
        (and naming once, as a warning) the rows whose JSON cannot be read.

        The limit is applied here rather than in SQL, so that a damaged row does not take
        the place of a readable one; rows are read lazily, so a small limit stays cheap.
        """
        records: list[_Record] = []
        if limit is not None and limit < 1:
            return records
        with self._read() as conn, closing(conn.execute(sql, list(params))) as cursor:
            for row in cursor:
                try:
                    records.append(parse(row))
                except DamagedRecordError as error:
                    self._leave_out(error.damaged)
                    continue
                if limit is not None and len(records) >= limit:
                    break
        return records

    def _leave_out(self, damaged: DamagedRow) -> None:
        key = (damaged.kind, damaged.ident)
        if key not in self._left_out:
            self._left_out[key] = damaged
            log.warning("%s; left out", damaged.describe())

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        try:
            yield conn
        except sqlite3.OperationalError as error:
            raise StoreError(f"cannot read results store {self.path}: {error}") from None


def utc_now() -> str:
    """Now, as stored: a fixed format (microseconds, +00:00), so that text order is time
    order."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def opt_int(value: Any) -> int | None:
    """A whole-number column's value, or NULL."""
    return None if value is None else int(value)


def newest_first_query(table: str, filters: dict[str, Any]) -> tuple[str, list[Any]]:
    """`SELECT * FROM table` with `column = ?` for every filter that is not None, newest
    first (`StoreFile._readable` applies the limit). Table and column names come from the
    store's modules, never from the user; values are bound as parameters."""
    clauses = [f"{column} = ?" for column, value in filters.items() if value is not None]
    params: list[Any] = [value for value in filters.values() if value is not None]
    sql = f"SELECT * FROM {table}"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    # rowid breaks ties between rows created within the same microsecond.
    sql += " ORDER BY created_at DESC, rowid DESC"
    return sql, params
