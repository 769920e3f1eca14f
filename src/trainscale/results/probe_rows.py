"""The probes of a results store: one row per hardware measurement of `trainscale probe`."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from trainscale.results.records import ProbeRecord, dumps, probe_record
from trainscale.results.schema import SCHEMA_VERSION
from trainscale.results.store_file import StoreFile, newest_first_query, opt_int, utc_now


class ProbeRows(StoreFile):
    """The `probes` table."""

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
                    utc_now(),
                    kind,
                    host,
                    device_type,
                    device,
                    opt_int(workers),
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
        sql, params = newest_first_query("probes", filters)
        return self._readable(sql, params, probe_record, limit)
