"""Schema 7: stored settings hashes recomputed by the rule that leaves defaults out.

Up to schema 6 a run's settings hash covered every setting, except a list of settings added
later while they kept the value earlier runs had. From schema 7 it leaves out every setting
at its declared default (`config.options.settings_hash`), so the hashes already stored are
recomputed from the stored configs, and each sweep's plan follows its runs: repeats, resumed
sweeps and reports keep finding the runs they matched before.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from trainscale.config.options import settings_hash


def migrate_settings_hashes(conn: sqlite3.Connection) -> int:
    """Recompute every stored settings hash; returns how many runs' hashes changed.

    A run whose config does not parse keeps its hash. A sweep's planned run takes the new
    hash of the run stored for it (its old hash, in that sweep); one never run keeps its
    old hash, so resuming its sweep is refused as from another trainscale version.
    """
    rows = conn.execute(
        "SELECT run_id, config_json, config_hash, sweep_id FROM runs WHERE config_hash IS NOT NULL"
    ).fetchall()
    renamed: dict[tuple[str | None, str], str] = {}  # (sweep, old hash) -> new hash
    changed = 0
    for run_id, config_text, old, sweep_id in rows:
        config = _parsed(config_text)
        if not isinstance(config, dict):
            continue
        new = settings_hash(config)
        renamed[(sweep_id, old)] = new
        if new != old:
            conn.execute("UPDATE runs SET config_hash = ? WHERE run_id = ?", (new, run_id))
            changed += 1
    for sweep_id, plan_text in conn.execute("SELECT sweep_id, plan_json FROM sweeps").fetchall():
        plan = _parsed(plan_text)
        if not isinstance(plan, list):
            continue
        for entry in plan:
            stored = entry.get("config_hash") if isinstance(entry, dict) else None
            key = (sweep_id, stored)
            if isinstance(stored, str) and key in renamed:
                entry["config_hash"] = renamed[key]
        conn.execute(
            "UPDATE sweeps SET plan_json = ? WHERE sweep_id = ?",
            (json.dumps(plan, sort_keys=True), sweep_id),
        )
    return changed


def _parsed(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None  # a damaged row: the store reports it where it is read
