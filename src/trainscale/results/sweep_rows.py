"""The sweeps of a results store: each sweep's spec and plan, and its runs as a sweep."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainscale.errors import StoreError
from trainscale.results.records import RunRecord, SweepRecord, dumps, run_record, sweep_record
from trainscale.results.store_file import StoreFile, newest_first_query, utc_now

SWEEPS_COMMAND = "`trainscale runs sweeps`"
"""The command that lists the stored sweeps, for messages that point to it."""


class SweepRows(StoreFile):
    """The `sweeps` table, and a sweep's runs."""

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
                (sweep_id, name, utc_now(), source, spec_hash, dumps(spec), dumps(list(plan))),
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
        sql, params = newest_first_query("sweeps", {})
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

    def fail_interrupted_runs(self, sweep_id: str, reason: str) -> int:
        """Mark a sweep's runs still 'running' as failed (their process was killed).

        Only call it when no other process is running this sweep. Returns how many.
        """
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE runs SET status = 'failed', error = ?, finished_at = ? "
                "WHERE sweep_id = ? AND status = 'running'",
                (reason, utc_now(), sweep_id),
            )
            return cursor.rowcount
