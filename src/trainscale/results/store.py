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
`results.sqlite_file`; the open file's transactions and listings in `results.store_file`;
the sweeps and the probes it stores in `results.sweep_rows` and `results.probe_rows`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from trainscale.errors import StoreError, capped_reason
from trainscale.results.owner import (
    STALE_PREFIX,
    Owner,
    current_owner,
    encode_host,
    is_gone,
    stale_reason,
    this_host,
)
from trainscale.results.probe_rows import ProbeRows
from trainscale.results.records import (
    RunRecord,
    dumps,
    loads_object,
    record_owner,
    run_record,
)
from trainscale.results.schema import DATA_KINDS, EPOCH_FIELDS, RUN_STATUSES, SCHEMA_VERSION
from trainscale.results.store_file import StoreUnwritable, newest_first_query, opt_int, utc_now
from trainscale.results.store_import import StoreImport
from trainscale.results.sweep_rows import SweepRows

STORE_ENV_VAR = "TRAINSCALE_STORE"
DEFAULT_STORE_NAME = "trainscale.db"


def default_store_path() -> Path:
    """The store used when none is given: `$TRAINSCALE_STORE`, else `./trainscale.db`."""
    from_env = os.environ.get(STORE_ENV_VAR, "").strip()
    return Path(from_env).expanduser() if from_env else Path(DEFAULT_STORE_NAME)


class RunStore(SweepRows, ProbeRows, StoreImport):
    """A results store file; open with `RunStore(path)`, use as a context manager.

    Its runs (with their epochs and step times) are written and read here; its sweeps in
    `SweepRows`, its probes in `ProbeRows`, the rows of another store brought in by
    `StoreImport`; the file itself (connections, transactions, damaged rows left out) in
    `StoreFile`."""

    def __init__(
        self, path: str | os.PathLike[str], *, create: bool = True, fail_stale: bool = False
    ) -> None:
        """Open (and with `create`, create) the store at `path` (see `StoreFile`).

        With `fail_stale`, runs left 'running' by a process of this host that is gone are
        marked failed first (`fail_stale_runs`), where the store can be written: what a
        command that reads runs should show.
        """
        super().__init__(path, create=create)
        if fail_stale:
            # A store this process may read but not write (read-only, locked past the
            # timeout, a full disk) keeps its stale rows until one that can write opens it.
            with contextlib.suppress(StoreError):
                self.fail_stale_runs()

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
            "created_at": utc_now(),
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
            "sweep_item": opt_int(sweep_item),
            "repeat_index": opt_int(repeat_index),
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
        result = (run_id, summary_json, epoch_rows, step_rows, global_batch_size)
        moved = self._moved()
        if moved is not None:
            # Written here, the result would go into a file nobody can open again; and a
            # new store at the path would hold no row for the run.
            self._keep_in_copy(moved, *result)
        try:
            self._complete(*result)
        except StoreUnwritable as refused:
            self._keep_in_copy(str(refused), *result)

    def _keep_in_copy(
        self,
        why: str,
        run_id: str,
        summary_json: str,
        epoch_rows: Sequence[tuple[Any, ...]],
        step_rows: Sequence[tuple[Any, ...]],
        global_batch_size: int | None,
    ) -> NoReturn:
        """StoreError saying `why` this store cannot take the run's result, after keeping
        the result in a copy of the store (`_save_copy`), completed there: the result is
        not lost, and `runs import` brings it into a store that can be written."""
        saved = self._save_copy()
        with RunStore(saved) as copy:  # one try: a copy that refuses too is the error
            copy._complete(run_id, summary_json, epoch_rows, step_rows, global_batch_size)
        raise StoreError(
            f"{why}; the run's result was saved to {saved} instead (`trainscale runs show "
            f"{run_id[:8]} --store {saved}`; `trainscale runs import {saved}` brings it in)"
        )

    def _complete(
        self,
        run_id: str,
        summary_json: str,
        epoch_rows: Sequence[tuple[Any, ...]],
        step_rows: Sequence[tuple[Any, ...]],
        global_batch_size: int | None,
    ) -> None:
        """`complete_run`'s one transaction, from the rows it encoded."""
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
                (utc_now(), summary_json, run_id),
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
        create: bool = True,
    ) -> bool:
        """Mark a run 'failed' with `reason`; returns whether this call recorded the failure.

        A run that does not exist yet (it failed before `create_run`) is inserted with
        whatever of the optional fields are known; with `create=False` (a caller that made
        the row itself) its absence is a StoreError: the store was replaced meanwhile. A
        completed run is left alone, and so is a run already failed: the first reason is
        usually the root cause (a worker crashed) and later ones its echo (the launcher saw
        the worker exit). A run failed as `stale:` by a reader (a guess that its owner was
        gone) takes the owner's reason instead.
        """
        if data_kind is not None:
            _check_data_kind(data_kind)
        reason = capped_reason(reason)
        now = utc_now()
        with self._write() as conn:
            status = _status(conn, run_id)
            if status is None and not create:
                raise StoreError(
                    f"run {run_id[:8]} is not in {self.path}: the store was replaced while the "
                    "run ran"
                )
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
                        "world_size": opt_int(world_size),
                        "threads_per_worker": opt_int(threads_per_worker),
                        "affinity": _affinity_text(affinity),
                        "precision": precision,
                        "global_batch_size": opt_int(global_batch_size),
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
                probe = conn.execute(
                    "SELECT kind FROM probes WHERE substr(probe_id, 1, ?) = ? LIMIT 1", params
                ).fetchone()
                if probe is not None:  # an id from `trainscale runs probes`
                    raise StoreError(
                        f"{prefix!r} in {self.path} is a probe ({probe['kind']}), not a run; "
                        "`trainscale runs probes --json` shows its figures"
                    )
                if "," in prefix:  # `--runs a,b` as --workers takes its list
                    ids = " ".join(part for part in prefix.replace(",", " ").split())
                    raise StoreError(
                        f"no run {prefix!r} in {self.path}: give run ids separated by spaces, "
                        f"not commas ({ids})"
                    )
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
        sql, params = newest_first_query("runs", filters)
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

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Delete these runs (full ids) with their epochs and step times, in one
        transaction; returns how many were deleted. A run still running is refused
        (StoreError) and nothing is deleted: its process would write into a row that is gone.
        A sweep keeps its plan, so resuming it makes its deleted runs again."""
        with self._write() as conn:
            for run_id in run_ids:
                if _status(conn, run_id) == "running":
                    raise StoreError(still_running_refusal(run_id))
            # Epochs and step times go with their run: the schema's ON DELETE CASCADE, with
            # foreign keys on in every connection (sqlite_file.py).
            return sum(
                conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount
                for run_id in run_ids
            )

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
        now = utc_now()
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


# -- helpers ------------------------------------------------------------------------------


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


def _affinity_text(affinity: Any) -> str | None:
    # The column is text; a structured plan (a list of core sets) is kept as JSON.
    if affinity is None or isinstance(affinity, str):
        return affinity
    return dumps(affinity)


def still_running_refusal(run_id: str) -> str:
    """Why a run still running cannot be deleted: its process would write into a row that
    is gone."""
    return f"run {run_id[:8]} is still running: stop it, or let it end, before deleting it"


def _epoch_row(run_id: str, index: int, epoch: Mapping[str, Any]) -> tuple[Any, ...]:
    number = int(epoch.get("epoch", index))
    values = tuple(_opt_float(epoch.get(name)) for name in EPOCH_FIELDS)
    return (run_id, number, *values)


def _opt_float(value: Any) -> float | None:
    # float() also turns numpy and 0-d torch scalars into something sqlite can bind.
    return None if value is None else float(value)
