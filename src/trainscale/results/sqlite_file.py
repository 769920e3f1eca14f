"""Opening a results store's SQLite file: the pragmas the store relies on (WAL, a generous
busy timeout, foreign keys), a current schema, and read-only connections that never change
the file, nor turn a file that is not a store into one."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trainscale.errors import StoreError
from trainscale.results.schema import (
    SCHEMA_VERSION,
    ensure_schema,
    read_schema_version,
    refuse_newer,
)

BUSY_TIMEOUT_S = 30.0
"""How long a writer waits for another writer's lock before giving up."""


def missing_store_message(path: Path) -> str:
    """The one-line message for reading a store that does not exist yet."""
    return f"no results store at {path}; run `trainscale run` first or pass --store"


def _refuse_special_file(path: Path) -> None:
    """StoreError for a device, FIFO or socket (/dev/null, say): SQLite would fail on it as
    a 'disk I/O error' and leave its journal beside it."""
    try:
        mode = path.stat().st_mode
    except OSError:  # absent: the callers say so
        return
    if not stat.S_ISREG(mode):
        raise StoreError(f"cannot open results store {path}: it is not a regular file")


def connect(path: Path, *, create: bool) -> sqlite3.Connection:
    """Open the file with the pragmas the store relies on and a current schema."""
    if path.is_dir():
        raise StoreError(f"cannot open results store {path}: it is a directory, not a file")
    _refuse_special_file(path)
    if not path.exists():
        if not create:
            raise StoreError(missing_store_message(path))
        # Only the file is created: a mistyped directory should fail, not appear.
        parent = path.parent
        if not parent.is_dir():
            raise StoreError(
                f"cannot create results store {path}: directory {parent} does not exist"
            )
        if not os.access(parent, os.W_OK | os.X_OK):
            raise StoreError(f"cannot create results store {path}: {parent} is not writable")
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as error:
        raise StoreError(f"cannot open results store {path}: {error}") from None
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        # WAL lets readers work while a writer commits; on filesystems without shared
        # memory SQLite keeps its rollback journal, which is still correct, only slower.
        _use_wal(conn)
        ensure_schema(conn)
    except StoreError as error:
        conn.close()
        raise StoreError(f"cannot use results store {path}: {error}") from None
    except sqlite3.Error as error:
        conn.close()
        raise StoreError(f"cannot open results store {path}: {error}") from None
    return conn


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`; None where it cannot be looked at."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def open_connection(path: Path, mode: str, *, immutable: bool = False) -> sqlite3.Connection:
    """An SQLite connection to an existing file in URI `mode` ('ro' or 'rw': neither
    creates the file), with the store's pragmas; sqlite3.Error where it cannot be opened."""
    uri = f"{path.absolute().as_uri()}?mode={mode}" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def connect_for_reading(path: Path) -> sqlite3.Connection:
    """Open an existing store read-only; StoreError for no file, a file that is not a store
    (which is left exactly as it was), or one from a newer trainscale.

    A store of an older schema is migrated first where it can be written (as a write opens
    it), and refused with what to do where it cannot.
    """
    if path.is_dir():
        raise StoreError(f"cannot open results store {path}: it is a directory, not a file")
    _refuse_special_file(path)
    if not path.exists():
        raise StoreError(missing_store_message(path))
    try:
        conn = open_read_only(path)
        with _closed_on_error(conn):
            version = read_schema_version(conn)
            refuse_newer(version)
    except StoreError as error:
        raise StoreError(f"cannot use results store {path}: {error}") from None
    except sqlite3.DatabaseError as error:
        if "not a database" in str(error):
            raise StoreError(not_a_store_message(path)) from None
        raise StoreError(f"cannot open results store {path}: {error}") from None
    if version == SCHEMA_VERSION:
        return conn
    conn.close()
    if version is None:  # no trainscale tables (an empty file is a valid, empty database)
        raise StoreError(not_a_store_message(path))
    # An older layout: reads would miss columns, so it is brought up to date, as before.
    try:
        connect(path, create=False).close()
    except StoreError as error:
        raise StoreError(
            f"{error}; results store {path} has schema version {version} and must be "
            "upgraded once by a trainscale that can write it"
        ) from None
    return connect_for_reading(path)


@contextmanager
def _closed_on_error(conn: sqlite3.Connection) -> Iterator[None]:
    """Close `conn` if the block fails (the caller will not get it)."""
    try:
        yield
    except BaseException:
        conn.close()
        raise


def open_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot change the store.

    Where this process may write the file and its directory, a read-write connection with
    `query_only` set: SQLite refuses every change through it, yet, as the last connection
    to close, it still folds the WAL back and removes the -wal and -shm files (a mode=ro
    connection would leave them behind). Elsewhere (a read-only mount, another user's
    store), mode=ro; and where the WAL's shared-memory file (-shm) cannot be created there,
    no writer is around to have made it, so the file cannot change while read and is opened
    as immutable.
    """
    if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK):
        conn = open_connection(path, "rw")
        with _closed_on_error(conn):
            conn.execute("PRAGMA query_only = ON")
        return conn
    conn = open_connection(path, "ro")
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError as error:
        conn.close()
        # A -shm that cannot be made: "unable to open" on a read-only mount; in a folder of
        # another user's, the text of every SQLITE_READONLY code (here _DIRECTORY or
        # _CANTINIT; the codes themselves reach Python from 3.11 on).
        reason = str(error)
        if "unable to open" not in reason and "readonly database" not in reason:
            raise
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            return _read_through_copy(path, wal)
        conn = open_connection(path, "ro", immutable=True)
    return conn


def _read_through_copy(path: Path, wal: Path) -> sqlite3.Connection:
    """An in-memory, query-only copy of the store at `path` with the changes its `wal` holds:
    the pair is copied to a temporary folder where SQLite may fold the WAL in, and the result
    backed up into memory (a store is megabytes), so nothing is left behind."""
    try:
        with tempfile.TemporaryDirectory(prefix="trainscale-store-") as folder:
            copy = Path(folder) / path.name
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
            on_disk = open_connection(copy, "rw")
            try:
                memory = sqlite3.connect(":memory:", isolation_level=None)
                on_disk.backup(memory)
            finally:
                on_disk.close()
    except (OSError, sqlite3.Error) as error:  # a full temporary folder, say
        raise StoreError(  # the callers name the store
            f"its changes in {wal.name} can only be read from a copy here, and the copy "
            f"failed ({error}); free space in the temporary folder, or point TMPDIR elsewhere"
        ) from None
    memory.row_factory = sqlite3.Row
    memory.execute("PRAGMA query_only = ON")
    return memory


def not_a_store_message(path: Path) -> str:
    """The one-line message for a read command given a file that is not a results store."""
    return f"{path} is not a trainscale results store; pass the store with --store"


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, waiting out a process that is switching the same new store at the same
    moment: SQLite answers that pragma 'database is locked' at once, without its busy
    handler, so the wait is here (up to the busy timeout)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
