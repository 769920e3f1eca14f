"""The SQLite results store: every run, its epochs and its step times, in one file.

Several processes may write to the same store at once (parallel sweeps, a report reading
while a run finishes). Two habits make that safe: WAL journaling with a generous busy
timeout, and short write transactions opened with `BEGIN IMMEDIATE`, which takes the write
lock up front so that two writers queue instead of failing with "database is locked" when a
read transaction tries to upgrade.

Commands that read runs open the store with `fail_stale=True`: rows left 'running' by a
process of this host that is gone (killed, or the machine restarted) are then marked failed,
so that no command shows a run as running that will never finish (see `results.owner`).

The records the store hands out, and how their JSON columns are written and read, are in
`results.records`; opening the file (its pragmas, schema, read-only connections) in
`results.sqlite_file`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from trainscale.errors import StoreError
from trainscale.results.owner import (
    STALE_PREFIX,
    Owner,
    current_owner,
    encode_host,
    is_gone,
    stale_reason,
    this_host,
)
from trainscale.results.records import (
    DamagedRecordError,
    DamagedRow,
    ProbeRecord,
    RunRecord,
    SweepRecord,
    dumps,
    loads_object,
    probe_record,
    record_owner,
    run_record,
    sweep_record,
)
from trainscale.results.schema import DATA_KINDS, EPOCH_FIELDS, RUN_STATUSES, SCHEMA_VERSION
from trainscale.results.sqlite_file import (
    connect,
    connect_for_reading,
    file_identity,
    open_connection,
)

STORE_ENV_VAR = "TRAINSCALE_STORE"
DEFAULT_STORE_NAME = "trainscale.db"
SWEEPS_COMMAND = "`trainscale runs sweeps`"
"""The command that lists the stored sweeps, for messages that point to it."""

log = logging.getLogger(__name__)
_Record = TypeVar("_Record")


def default_store_path() -> Path:
    """The store used when none is given: `$TRAINSCALE_STORE`, else `./trainscale.db`."""
    from_env = os.environ.get(STORE_ENV_VAR, "").strip()
    return Path(from_env).expanduser() if from_env else Path(DEFAULT_STORE_NAME)


class RunStore:
    """A results store file; open with `RunStore(path)`, use as a context manager."""

    def __init__(
        self, path: str | os.PathLike[str], *, create: bool = True, fail_stale: bool = False
    ) -> None:
        """Open (and with `create`, create) the store at `path`.

        Raises StoreError naming the path when it cannot be used: a missing parent directory,
        a directory, a file that is not SQLite, a store from a newer trainscale, or (with
        create=False) no file at all. With `fail_stale`, runs left 'running' by a process of
        this host that is gone are marked failed first (`fail_stale_runs`), where the store
        can be written: what a command that reads runs should show.

        create=False opens for reading: through a connection that cannot change the file
        (SQLite's mode=ro, or query_only where the file is writable; see `_open_read_only`),
        so a store on a read-only mount or of another user can be read, and a file that is
        not a store is refused, never turned into one. A write through such a store (marking
        stale runs; migrating an older schema) opens its own read-write connection, which
        never creates the file, and fails as any write does where the file is not writable.
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
        if fail_stale:
            # A store this process may read but not write (read-only, locked past the
            # timeout, a full disk) keeps its stale rows until one that can write opens it.
            with contextlib.suppress(StoreError):
                self.fail_stale_runs()

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

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    # -- writes -------------------------------------------------------------------------

    def create_run(
        self,
        run_id: str,
        workload: str,
        config: Mapping[str, Any],
        env: Mapping[str, Any],
        *,
        data_kind: str,
        world_size: int,
        threads_per_worker: int,
        affinity: str | None,
        precision: str,
        global_batch_size: int,
        tag: str | None = None,
        config_hash: str | None = None,
        sweep_id: str | None = None,
        sweep_item: int | None = None,
        repeat_index: int | None = None,
        owner: Owner | None = None,
    ) -> None:
        """Register a new run with status 'running'; a duplicate run id is a StoreError.

        `owner` is the process that will record how the run ends (default: this one).
        """
        if not run_id:
            raise ValueError("run_id must be a non-empty string")
        _check_data_kind(data_kind)
        owner = owner or current_owner()
        row = {
            "run_id": run_id,
            "created_at": _utc_now(),
            "status": "running",
            "workload": workload,
            "data_kind": data_kind,
            "world_size": int(world_size),
            "threads_per_worker": int(threads_per_worker),
            "affinity": _affinity_text(affinity),
            "precision": precision,
            "global_batch_size": int(global_batch_size),
            "tag": tag,
            "config_json": dumps(config),
            "env_json": dumps(env),
            "schema_version": SCHEMA_VERSION,
            "config_hash": config_hash,
            "sweep_id": sweep_id,
            "sweep_item": _opt_int(sweep_item),
            "repeat_index": _opt_int(repeat_index),
            "owner_host": encode_host(owner),
            "owner_pid": owner.pid,
            "owner_started": owner.started,
        }
        with self._write() as conn:
            if _status(conn, run_id) is not None:
                raise StoreError(f"run {run_id} already exists in {self.path}")
            _insert_run(conn, row)

    def complete_run(
        self,
        run_id: str,
        summary: Mapping[str, Any],
        epochs: Sequence[Mapping[str, Any]],
        step_times_s: Sequence[float],
        global_batch_size: int | None = None,
    ) -> None:
        """Store the results of a running run and mark it 'completed', all in one transaction.

        `global_batch_size`, when given, replaces the column's value: a script run's batch
        is the script's, known only once it has run (runner/record.py).

        `epochs` are dicts with an optional `epoch` number (default: position, from 1) and any
        of the per-epoch fields (`train_loss`, `test_loss`, `test_accuracy`, `train_clock_s`,
        `epoch_time_s`, `eval_time_s`); other keys are ignored. `step_times_s` is the per-step
        time of the run (the slowest rank's), in step order. If anything fails, nothing is
        written and the run stays 'running'. A run failed as `stale:` (a reader's guess that
        its owner was gone) is completed all the same: the result proves the guess wrong.
        """
        # Encode and convert before taking the write lock: a bad value should fail fast and
        # never hold other writers up.
        summary_json = dumps(summary)
        epoch_rows = [_epoch_row(run_id, index, epoch) for index, epoch in enumerate(epochs, 1)]
        step_rows = [(run_id, step, float(t)) for step, t in enumerate(step_times_s)]
        moved = self._moved()
        if moved is not None:
            # Written here, the result would go into a file nobody can open again; and a
            # new store at the path would hold no row for the run. Keep it in a copy.
            saved = self._save_copy()
            with RunStore(saved) as copy:
                copy.complete_run(run_id, summary, epochs, step_times_s, global_batch_size)
            raise StoreError(
                f"{moved}; the run's result was saved to {saved} instead "
                f"(`trainscale runs show {run_id[:8]} --store {saved}`)"
            )
        with self._write() as conn:
            status = _status(conn, run_id)
            if status is None:
                raise StoreError(f"no run {run_id} in {self.path} to complete")
            if status != "running" and not _failed_as_stale(conn, run_id):
                raise StoreError(f"run {run_id} is already {status}; it cannot be completed")
            conn.executemany(
                f"INSERT INTO epochs (run_id, epoch, {', '.join(EPOCH_FIELDS)}) "
                f"VALUES ({', '.join('?' * (len(EPOCH_FIELDS) + 2))})",
                epoch_rows,
            )
            conn.executemany(
                "INSERT INTO step_times (run_id, step, step_time_s) VALUES (?, ?, ?)", step_rows
            )
            conn.execute(
                "UPDATE runs SET status = 'completed', finished_at = ?, summary_json = ?, "
                "error = NULL WHERE run_id = ?",
                (_utc_now(), summary_json, run_id),
            )
            if global_batch_size is not None:
                conn.execute(
                    "UPDATE runs SET global_batch_size = ? WHERE run_id = ?",
                    (int(global_batch_size), run_id),
                )

    def add_to_summary(self, run_id: str, fields: Mapping[str, Any]) -> bool:
        """Add keys measured outside the workers (the launching process's contention
        figures) to a completed run's summary, in one transaction; returns whether the run
        was completed and got them. Other keys are left as rank 0 stored them."""
        encoded = json.loads(dumps(dict(fields)))  # fail fast on a value JSON cannot hold
        with self._write() as conn:
            if _status(conn, run_id) != "completed":
                return False
            row = conn.execute(
                "SELECT summary_json FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            summary = loads_object(row[0])
            summary.update(encoded)
            conn.execute(
                "UPDATE runs SET summary_json = ? WHERE run_id = ?", (dumps(summary), run_id)
            )
        return True

    def fail_run(
        self,
        run_id: str,
        reason: str,
        *,
        workload: str | None = None,
        config: Mapping[str, Any] | None = None,
        env: Mapping[str, Any] | None = None,
        data_kind: str | None = None,
        world_size: int | None = None,
        threads_per_worker: int | None = None,
        affinity: str | None = None,
        precision: str | None = None,
        global_batch_size: int | None = None,
        tag: str | None = None,
    ) -> bool:
        """Mark a run 'failed' with `reason`; returns whether this call recorded the failure.

        A run that does not exist yet (it failed before `create_run`) is inserted with
        whatever of the optional fields are known. A completed run is left alone, and so is a
        run already failed: the first reason is usually the root cause (a worker crashed)
        and later ones its echo (the launcher saw the worker exit). A run failed as `stale:`
        by a reader (a guess that its owner was gone) takes the owner's reason instead.
        """
        if data_kind is not None:
            _check_data_kind(data_kind)
        now = _utc_now()
        with self._write() as conn:
            status = _status(conn, run_id)
            if status is None:
                _insert_run(
                    conn,
                    {
                        "run_id": run_id,
                        "created_at": now,
                        "finished_at": now,
                        "status": "failed",
                        "error": reason,
                        "workload": workload,
                        "data_kind": data_kind,
                        "world_size": _opt_int(world_size),
                        "threads_per_worker": _opt_int(threads_per_worker),
                        "affinity": _affinity_text(affinity),
                        "precision": precision,
                        "global_batch_size": _opt_int(global_batch_size),
                        "tag": tag,
                        "config_json": dumps(config or {}),
                        "env_json": dumps(env or {}),
                        "schema_version": SCHEMA_VERSION,
                    },
                )
                return True
            # A `stale:` guess gives way to the owner's own reason, which names the cause.
            if status != "running" and not _failed_as_stale(conn, run_id):
                return False
            conn.execute(
                "UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE run_id = ?",
                (reason, now, run_id),
            )
            return True

    # -- reads --------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        """The run with this id, or the only run whose id starts with it.

        An empty, unknown or ambiguous id is a StoreError that says what to do instead; a
        run whose stored JSON is damaged is a DamagedRecordError naming it.
        """
        prefix = run_id.strip()
        if not prefix:
            raise StoreError("empty run id; `trainscale runs list` shows the stored runs")
        with self._read() as conn:
            row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (prefix,)).fetchone()
            if row is not None:
                return run_record(row)
            # substr() rather than LIKE: run ids may contain '_' or '%'.
            where = "substr(run_id, 1, ?) = ?"
            params = (len(prefix), prefix)
            (count,) = conn.execute(f"SELECT count(*) FROM runs WHERE {where}", params).fetchone()
            if count == 0:
                raise StoreError(
                    f"no run {prefix!r} in {self.path}; `trainscale runs list` shows the "
                    "stored runs"
                )
            rows = conn.execute(
                f"SELECT * FROM runs WHERE {where} ORDER BY created_at DESC, rowid DESC LIMIT 5",
                params,
            ).fetchall()
        if count == 1:
            return run_record(rows[0])
        shown = ", ".join(r["run_id"] for r in rows) + (", ..." if count > len(rows) else "")
        raise StoreError(
            f"run id prefix {prefix!r} matches {count} runs ({shown}); give more characters"
        )

    def list_runs(
        self,
        workload: str | None = None,
        status: str | None = None,
        tag: str | None = None,
        limit: int | None = None,
        sweep_id: str | None = None,
    ) -> list[RunRecord]:
        """Stored runs matching all the given filters, newest first, at most `limit` of them.

        Damaged rows are left out (see `left_out`) and do not count towards `limit`.
        """
        if status is not None and status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, not {status!r}")
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        filters = {"workload": workload, "status": status, "tag": tag, "sweep_id": sweep_id}
        sql, params = _newest_first_query("runs", filters)
        return self._readable(sql, params, run_record, limit)

    def epochs(self, run_id: str) -> list[dict[str, Any]]:
        """Per-epoch rows of a run (full id), in epoch order; empty unless it completed."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT epoch, {', '.join(EPOCH_FIELDS)} FROM epochs WHERE run_id = ? "
                "ORDER BY epoch",
                (run_id,),
            ).fetchall()
        return [dict(row) for row in rows]

    def step_times(self, run_id: str) -> list[float]:
        """Per-step times of a run (full id) in seconds, in step order."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT step_time_s FROM step_times WHERE run_id = ? ORDER BY step", (run_id,)
            ).fetchall()
        return [row[0] for row in rows]

    # -- sweeps -------------------------------------------------------------------------

    def create_sweep(
        self,
        sweep_id: str,
        name: str,
        source: str,
        spec_hash: str,
        spec: Mapping[str, Any],
        plan: Sequence[Mapping[str, Any]],
    ) -> None:
        """Store a new sweep and its plan (before any of its runs starts)."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO sweeps (sweep_id, name, created_at, source, spec_hash, spec_json, "
                "plan_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (sweep_id, name, _utc_now(), source, spec_hash, dumps(spec), dumps(list(plan))),
            )

    def get_sweep(self, sweep_id: str) -> SweepRecord:
        """The sweep with this id or unique id prefix; StoreError otherwise (a
        DamagedRecordError when its stored JSON is damaged)."""
        prefix = sweep_id.strip()
        if not prefix:
            raise StoreError(f"empty sweep id; {SWEEPS_COMMAND} lists the stored sweeps")
        with self._read() as conn:
            rows = conn.execute(
                "SELECT * FROM sweeps WHERE substr(sweep_id, 1, ?) = ? "
                "ORDER BY created_at DESC LIMIT 6",
                (len(prefix), prefix),
            ).fetchall()
        exact = [row for row in rows if row["sweep_id"] == prefix]
        if exact:
            return sweep_record(exact[0])
        if not rows:
            raise StoreError(
                f"no sweep {prefix!r} in {self.path}; {SWEEPS_COMMAND} lists the stored sweeps"
            )
        if len(rows) > 1:
            shown = ", ".join(row["sweep_id"] for row in rows[:5])
            raise StoreError(f"sweep id prefix {prefix!r} matches several sweeps ({shown})")
        return sweep_record(rows[0])

    def list_sweeps(self, limit: int | None = None) -> list[SweepRecord]:
        """Stored sweeps, newest first, at most `limit` of them; damaged rows left out."""
        sql, params = _newest_first_query("sweeps", {})
        return self._readable(sql, params, sweep_record, limit)

    def sweep_progress(self) -> dict[str, int]:
        """Per sweep id, how many of its planned runs have completed. A planned run is a
        configuration and a repeat, as `trainscale sweep --resume` counts them: a second
        completed attempt of the same one counts once."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT sweep_id, "
                "count(DISTINCT coalesce(config_hash || ':' || repeat_index, run_id)) "
                "FROM runs WHERE sweep_id IS NOT NULL AND status = 'completed' GROUP BY sweep_id"
            ).fetchall()
        return {sweep_id: count for sweep_id, count in rows}

    def latest_sweep_with_spec(self, spec_hash: str) -> SweepRecord | None:
        """The newest sweep made from the same normalised spec, if any (for --resume)."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT * FROM sweeps WHERE spec_hash = ? ORDER BY created_at DESC LIMIT 1",
                (spec_hash,),
            ).fetchone()
        return None if row is None else sweep_record(row)

    def sweep_runs(self, sweep_id: str) -> list[RunRecord]:
        """Every run of a sweep (full id), in plan order, earlier attempts first; damaged
        rows left out."""
        sql = "SELECT * FROM runs WHERE sweep_id = ? ORDER BY sweep_item, created_at, rowid"
        return self._readable(sql, [sweep_id], run_record, None)

    def fail_stale_runs(self) -> list[str]:
        """Mark failed the runs left 'running' by a process of this host that is gone.

        Gone: killed (SIGKILL, the OOM killer), or the machine restarted; a pid now used by
        another process does not count as the owner (start times differ). Rows owned on
        other hosts, in another pid namespace or on another live machine of the same host
        name (see `results.owner`), and rows from before schema 4 (no owner), are left
        alone. Returns the ids of the runs marked.
        """
        host = this_host()
        with self._read() as conn:
            # The stored host may carry the boot id and namespace after a space.
            rows = conn.execute(
                "SELECT run_id, owner_host, owner_pid, owner_started FROM runs "
                "WHERE status = 'running' AND (owner_host = ? OR substr(owner_host, 1, ?) = ?)",
                (host, len(host) + 1, host + " "),
            ).fetchall()
        owned = [
            (row["run_id"], record_owner(row))
            for row in rows
            if row["owner_pid"] is not None and row["owner_started"] is not None
        ]
        # A process that is gone stays gone: no need to look again under the write lock. The
        # status test in the UPDATE keeps a run its owner finished meanwhile as it is.
        gone = [(run_id, owner) for run_id, owner in owned if is_gone(owner)]
        if not gone:
            return []
        marked = []
        now = _utc_now()
        with self._write() as conn:
            for run_id, owner in gone:
                cursor = conn.execute(
                    "UPDATE runs SET status = 'failed', error = ?, finished_at = ? "
                    "WHERE run_id = ? AND status = 'running'",
                    (stale_reason(owner), now, run_id),
                )
                if cursor.rowcount:
                    marked.append(run_id)
        return marked

    def fail_interrupted_runs(self, sweep_id: str, reason: str) -> int:
        """Mark a sweep's runs still 'running' as failed (their process was killed).

        Only call it when no other process is running this sweep. Returns how many.
        """
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE runs SET status = 'failed', error = ?, finished_at = ? "
                "WHERE sweep_id = ? AND status = 'running'",
                (reason, _utc_now(), sweep_id),
            )
            return cursor.rowcount

    # -- probes -------------------------------------------------------------------------

    def add_probe(
        self,
        kind: str,
        result: Mapping[str, Any],
        env: Mapping[str, Any],
        *,
        host: str | None,
        device_type: str | None,
        device: str | None,
        workers: int | None = None,
    ) -> str:
        """Store one probe measurement; returns its new id."""
        probe_id = uuid.uuid4().hex
        result_json, env_json = dumps(result), dumps(env)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO probes (probe_id, created_at, kind, host, device_type, device, "
                "workers, result_json, env_json, schema_version) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    probe_id,
                    _utc_now(),
                    kind,
                    host,
                    device_type,
                    device,
                    _opt_int(workers),
                    result_json,
                    env_json,
                    SCHEMA_VERSION,
                ),
            )
        return probe_id

    def latest_probe(
        self,
        kind: str,
        *,
        host: str | None = None,
        device: str | None = None,
        device_type: str | None = None,
    ) -> ProbeRecord | None:
        """The newest probe of `kind` matching the given host, device and device type."""
        probes = self.list_probes(
            kind=kind, host=host, device=device, device_type=device_type, limit=1
        )
        return probes[0] if probes else None

    def list_probes(
        self,
        *,
        kind: str | None = None,
        host: str | None = None,
        device: str | None = None,
        device_type: str | None = None,
        limit: int | None = None,
    ) -> list[ProbeRecord]:
        """Stored probes matching all the given filters, newest first; damaged rows left out
        (so `latest_probe` finds the newest readable one)."""
        filters = {"kind": kind, "host": host, "device": device, "device_type": device_type}
        sql, params = _newest_first_query("probes", filters)
        return self._readable(sql, params, probe_record, limit)

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
            f"results store {self.path} is gone, and no copy could be saved ({'; '.join(problems)})"
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
            raise StoreError(f"cannot write results store {self.path}: {error}") from None

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


# -- helpers ------------------------------------------------------------------------------


def _utc_now() -> str:
    # A fixed format (microseconds, +00:00) so that text order is time order.
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _failed_as_stale(conn: sqlite3.Connection, run_id: str) -> bool:
    """Whether the run is failed only because a reader guessed its owner was gone (a
    `stale:` reason, see `results.owner`): its owner's own word, arriving later, wins."""
    row = conn.execute("SELECT status, error FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return row is not None and row[0] == "failed" and str(row[1] or "").startswith(STALE_PREFIX)


def _status(conn: sqlite3.Connection, run_id: str) -> str | None:
    row = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else row[0]


def _insert_run(conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
    columns = ", ".join(row)
    marks = ", ".join(f":{name}" for name in row)
    conn.execute(f"INSERT INTO runs ({columns}) VALUES ({marks})", dict(row))


def _check_data_kind(data_kind: str) -> None:
    if data_kind not in DATA_KINDS:
        raise ValueError(f"data_kind must be one of {', '.join(DATA_KINDS)}, not {data_kind!r}")


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _affinity_text(affinity: Any) -> str | None:
    # The column is text; a structured plan (a list of core sets) is kept as JSON.
    if affinity is None or isinstance(affinity, str):
        return affinity
    return dumps(affinity)


def _epoch_row(run_id: str, index: int, epoch: Mapping[str, Any]) -> tuple[Any, ...]:
    number = int(epoch.get("epoch", index))
    values = tuple(_opt_float(epoch.get(name)) for name in EPOCH_FIELDS)
    return (run_id, number, *values)


def _opt_float(value: Any) -> float | None:
    # float() also turns numpy and 0-d torch scalars into something sqlite can bind.
    return None if value is None else float(value)


def _newest_first_query(table: str, filters: dict[str, Any]) -> tuple[str, list[Any]]:
    """`SELECT * FROM table` with `column = ?` for every filter that is not None, newest
    first (`RunStore._readable` applies the limit). Table and column names come from this
    module, never from the user; values are bound as parameters."""
    clauses = [f"{column} = ?" for column, value in filters.items() if value is not None]
    params: list[Any] = [value for value in filters.values() if value is not None]
    sql = f"SELECT * FROM {table}"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    # rowid breaks ties between rows created within the same microsecond.
    sql += " ORDER BY created_at DESC, rowid DESC"
    return sql, params
