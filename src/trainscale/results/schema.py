"""The versioned SQLite schema of the results store.

One row per run in `runs` (config, environment and summary kept as JSON so that new summary
keys need no migration), one row per epoch in `epochs`, one row per timed step in
`step_times`, one row per sweep in `sweeps` (its spec and its planned runs; each run of a
sweep names its sweep, its place in the plan, its resolved-config hash and its repeat index),
and one row per hardware measurement of `trainscale probe` in `probes` (matmul FLOP/s,
host-device and all-reduce bandwidth, with the machine it was measured on). A run records
the process that owns it while it is 'running' (host, pid, start time), so that a row whose
process is gone can be told from one still running.
`meta` records the schema version the file was written with, so that an older trainscale
refuses a newer file instead of misreading it, and a newer one can migrate an older file in
place.

Schema 5 changed no table: it rewrote the throughput of the stored runs, from samples over
the sum of the timed steps (a mean) to the batch over the median timed step, keeping the
mean-based figures beside it (`migrate_throughput_to_median`). Schema 6 changed no table
either: the runs of the text workloads, whose steps do unequal work by design, get their
throughput back over the mean step (`migrate_unequal_steps_to_mean`). Schema 7 recomputed
the runs' settings hashes, and their sweeps' plans, by the rule that leaves every setting at
its default out (`migrate_settings_hashes`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import Any

from trainscale.errors import StoreError
from trainscale.metrics.stats import is_positive_number
from trainscale.metrics.throughput import throughput
from trainscale.results.hash_migration import migrate_settings_hashes

SCHEMA_VERSION = 7
"""The schema version this code reads and writes; bump it and extend `migrate` together."""

RUN_STATUSES = ("running", "completed", "failed")
DATA_KINDS = ("real", "synthetic")

RUN_SWEEP_COLUMNS = (
    "sweep_id TEXT",
    "sweep_item INTEGER",
    "config_hash TEXT",
    "repeat_index INTEGER",
)
"""Columns of `runs` that place a run in a sweep (NULL for a run made on its own)."""

RUN_OWNER_COLUMNS = (
    "owner_host TEXT",
    "owner_pid INTEGER",
    "owner_started REAL",
)
"""Columns of `runs` that name the process that created the row and, while the run is
'running', owns it: its host name, pid and start time (seconds since the epoch; a pid
reused by a later process has another start time). NULL in rows from schema 3 and before."""

SWEEPS_DDL = """
    CREATE TABLE IF NOT EXISTS sweeps (
        sweep_id   TEXT PRIMARY KEY,
        name       TEXT NOT NULL,
        created_at TEXT NOT NULL,
        source     TEXT NOT NULL,
        spec_hash  TEXT NOT NULL,
        spec_json  TEXT NOT NULL,
        plan_json  TEXT NOT NULL
    )
    """
"""A sweep: where it came from (a file or a recipe), its normalised spec, and its plan (the
runs to make, in order). Runs point back with `runs.sweep_id` and `runs.sweep_item`."""

PROBES_DDL = """
    CREATE TABLE IF NOT EXISTS probes (
        probe_id       TEXT PRIMARY KEY,
        created_at     TEXT NOT NULL,
        kind           TEXT NOT NULL,
        host           TEXT,
        device_type    TEXT,
        device         TEXT,
        workers        INTEGER,
        result_json    TEXT NOT NULL DEFAULT '{}',
        env_json       TEXT NOT NULL DEFAULT '{}',
        schema_version INTEGER NOT NULL
    )
    """
"""One hardware measurement: its kind ('matmul', 'transfer', 'allreduce'), the host and
device it measured ('cpu' or 'cuda', and the CPU model or GPU name), the processes of an
all-reduce, the figures (JSON) and the environment."""

RUNS_RUNNING_INDEX = (
    "CREATE INDEX IF NOT EXISTS runs_running ON runs (owner_host) WHERE status = 'running'"
)
"""Finds the running runs of a host without reading the others (every open looks for stale
ones)."""

PROBES_INDEX = "CREATE INDEX IF NOT EXISTS probes_lookup ON probes (kind, host, device, created_at)"

# Statements are kept apart (not one script) so that they can run inside an explicit
# BEGIN IMMEDIATE transaction: `executescript` would commit first and drop the lock.
DDL: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS meta (
        key   TEXT PRIMARY KEY,
        value TEXT
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS runs (
        run_id             TEXT PRIMARY KEY,
        created_at         TEXT NOT NULL,
        finished_at        TEXT,
        status             TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
        error              TEXT,
        workload           TEXT,
        data_kind          TEXT CHECK (data_kind IN ('real', 'synthetic')),
        world_size         INTEGER,
        threads_per_worker INTEGER,
        affinity           TEXT,
        precision          TEXT,
        global_batch_size  INTEGER,
        tag                TEXT,
        config_json        TEXT NOT NULL DEFAULT '{}',
        env_json           TEXT NOT NULL DEFAULT '{}',
        summary_json       TEXT NOT NULL DEFAULT '{}',
        schema_version     INTEGER NOT NULL,
        """
    + ",\n        ".join(RUN_SWEEP_COLUMNS + RUN_OWNER_COLUMNS)
    + """
    )
    """,
    SWEEPS_DDL,
    PROBES_DDL,
    """
    CREATE TABLE IF NOT EXISTS epochs (
        run_id        TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        epoch         INTEGER NOT NULL,
        train_loss    REAL,
        test_loss     REAL,
        test_accuracy REAL,
        train_clock_s REAL,
        epoch_time_s  REAL,
        eval_time_s   REAL,
        PRIMARY KEY (run_id, epoch)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS step_times (
        run_id      TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        step        INTEGER NOT NULL,
        step_time_s REAL NOT NULL,
        PRIMARY KEY (run_id, step)
    )
    """,
    "CREATE INDEX IF NOT EXISTS runs_workload ON runs (workload)",
    "CREATE INDEX IF NOT EXISTS runs_created_at ON runs (created_at)",
    "CREATE INDEX IF NOT EXISTS runs_tag ON runs (tag)",
    "CREATE INDEX IF NOT EXISTS runs_sweep ON runs (sweep_id, sweep_item)",
    RUNS_RUNNING_INDEX,
    PROBES_INDEX,
)

EPOCH_FIELDS = (
    "train_loss",
    "test_loss",
    "test_accuracy",
    "train_clock_s",
    "epoch_time_s",
    "eval_time_s",
)
"""Per-epoch measurements stored besides the epoch number (all optional, seconds and ratios)."""


def missing_from_layout(conn: sqlite3.Connection) -> str | None:
    """The first table or column of this version's layout that `conn`'s database lacks
    ('table sweeps', 'column runs.affinity'); None where it has them all."""
    with closing(sqlite3.connect(":memory:")) as layout:
        for statement in DDL:
            layout.execute(statement)
        tables = layout.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        for (table,) in tables.fetchall():
            wanted = [row[1] for row in layout.execute(f"PRAGMA table_info({table})")]
            present = {row[1] for row in conn.execute(f"PRAGMA main.table_info({table})")}
            if not present:
                return f"table {table}"
            missing = [column for column in wanted if column not in present]
            if missing:
                return f"column {table}.{missing[0]}"
    return None


def read_schema_version(conn: sqlite3.Connection) -> int | None:
    """The schema version recorded in the file, or None for a file without trainscale tables."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if has_meta is None:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise StoreError(f"unreadable schema_version {row[0]!r} in its meta table") from None


def migrate(conn: sqlite3.Connection, from_version: int) -> None:
    """Bring a store written with `from_version` up to `SCHEMA_VERSION`, in place.

    Called inside the caller's write transaction, so a failed migration leaves the file as it
    was. One step per version bump.
    """
    if from_version < 1:
        raise StoreError(f"unknown results store schema version {from_version}")
    if from_version < 2:
        # v2: sweeps, and the columns that tie a run to its place in a sweep.
        conn.execute(SWEEPS_DDL)
        for column in RUN_SWEEP_COLUMNS:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {column}")
        conn.execute("CREATE INDEX IF NOT EXISTS runs_sweep ON runs (sweep_id, sweep_item)")
    if from_version < 3:
        # v3: hardware probes (matmul peak, host-device and all-reduce bandwidth).
        conn.execute(PROBES_DDL)
        conn.execute(PROBES_INDEX)
    if from_version < 4:
        # v4: the process that owns a running run (stale rows are found by it). Older rows
        # keep NULL: their owner is unknown, so they are never declared stale.
        for column in RUN_OWNER_COLUMNS:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {column}")
        conn.execute(RUNS_RUNNING_INDEX)
    if from_version < 5:
        # v5: a run's throughput is its batch over its median timed step.
        migrate_throughput_to_median(conn)
    if from_version < 6:
        # v6: ... except where the workload's steps do unequal work: over the mean step.
        migrate_unequal_steps_to_mean(conn)
    if from_version < 7:
        # v7: a settings hash leaves out every setting at its default (one rule).
        migrate_settings_hashes(conn)


THROUGHPUT_PROPORTIONAL = ("achieved_tflops", "mfu", "mfu_vs_probe")
"""Summary figures proportional to `samples_per_s` (hardware/figures.py), rewritten with it."""


def migrate_throughput_to_median(conn: sqlite3.Connection) -> int:
    """Rewrite every stored run's throughput on the median step; returns how many changed.

    Up to schema 4 `samples_per_s` was global batch x timed steps / their sum, so the mean
    timed step is exactly global batch / that figure. For each run whose summary holds
    `samples_per_s`, `step_time_s_median` and whose row holds its global batch:
    `samples_per_s_mean` := the old `samples_per_s`, `step_time_s_mean` := global batch / it,
    `samples_per_s` := global batch / `step_time_s_median`; the per-worker figure likewise
    (its batch is the old per-worker figure times the mean step), and the figures made from
    it (`THROUGHPUT_PROPORTIONAL`) scale with it. Emulations (no median
    step), runs without a summary and summaries that do not parse are left as they are.
    """
    rows = conn.execute(
        "SELECT run_id, summary_json, global_batch_size FROM runs WHERE summary_json != '{}'"
    ).fetchall()
    return _rewrite_summaries(conn, rows, _median_based)


def _rewrite_summaries(
    conn: sqlite3.Connection, rows: Sequence[Sequence[Any]], rewrite: Callable[..., bool]
) -> int:
    """Store each row's summary as `rewrite(summary, *rest of the row)` left it, where it
    says it changed it; rows are (run_id, summary_json, ...). Returns how many changed."""
    changed = 0
    for run_id, text, *rest in rows:
        summary = _parsed(text)
        if summary is None or not rewrite(summary, *rest):
            continue
        conn.execute(
            "UPDATE runs SET summary_json = ? WHERE run_id = ?",
            (json.dumps(summary, sort_keys=True), run_id),
        )
        changed += 1
    return changed


def _parsed(text: Any) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None  # a damaged row: the store reports it where it is read
    return value if isinstance(value, dict) else None


def _median_based(summary: dict[str, Any], global_batch: Any) -> bool:
    """Rewrite one schema-4 summary in place (see `migrate_throughput_to_median`); False
    where it lacks what the rewrite needs or was already rewritten."""
    old, median = summary.get("samples_per_s"), summary.get("step_time_s_median")
    if "step_time_s_mean" in summary or not (
        is_positive_number(old) and is_positive_number(median) and is_positive_number(global_batch)
    ):
        return False
    mean = global_batch / old
    summary["samples_per_s_mean"] = old
    summary["step_time_s_mean"] = mean
    summary["samples_per_s"] = throughput(global_batch, median)
    per_worker = summary.get("samples_per_s_per_worker")
    if is_positive_number(per_worker):
        summary["samples_per_s_per_worker"] = throughput(per_worker * mean, median)
    # Achieved FLOP/s and its shares of a peak are FLOPs per sample x samples/s: they follow.
    for key in THROUGHPUT_PROPORTIONAL:
        if is_positive_number(summary.get(key)):
            summary[key] = summary[key] * mean / median
    return True


UNEQUAL_STEP_WORKLOADS = ("imdb-bilstm", "imdb-bigru", "tweets-text")
"""The built-in workloads whose steps do unequal work by design (`Workload.unequal_steps`)
when schema 6 was made; a test keeps this in step with the registry, which the store does
not import."""


def migrate_unequal_steps_to_mean(conn: sqlite3.Connection) -> int:
    """Rewrite the stored runs of `UNEQUAL_STEP_WORKLOADS` on their mean step, as such runs
    are now stored; returns how many changed.

    For each run of those workloads whose summary holds positive `samples_per_s` and
    `samples_per_s_mean` and no `unequal_steps` key (stored before the rule):
    `samples_per_s` := `samples_per_s_mean`, and the per-worker figure and those made from
    the throughput (`THROUGHPUT_PROPORTIONAL`) scale with it; `unequal_steps` := true. The
    median step stays the step time. Other runs are left as they are.
    """
    marks = ", ".join("?" for _ in UNEQUAL_STEP_WORKLOADS)
    rows = conn.execute(
        f"SELECT run_id, summary_json FROM runs WHERE workload IN ({marks}) "
        "AND summary_json != '{}'",
        UNEQUAL_STEP_WORKLOADS,
    ).fetchall()
    return _rewrite_summaries(conn, rows, _mean_based)


def _mean_based(summary: dict[str, Any]) -> bool:
    """Rewrite one unequal-step run's summary in place (see `migrate_unequal_steps_to_mean`);
    False where it lacks what the rewrite needs or already follows the rule."""
    median_based, mean_based = summary.get("samples_per_s"), summary.get("samples_per_s_mean")
    if "unequal_steps" in summary or not (
        is_positive_number(median_based) and is_positive_number(mean_based)
    ):
        return False
    scale = mean_based / median_based
    summary["samples_per_s"] = mean_based
    for key in ("samples_per_s_per_worker", *THROUGHPUT_PROPORTIONAL):
        if is_positive_number(summary.get(key)):
            summary[key] = summary[key] * scale
    summary["unequal_steps"] = True
    return True


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the tables in an empty file, migrate an older one, refuse a newer one.

    `conn` must be in autocommit mode (isolation_level=None). The common case (the file is
    already current) only reads; the write lock is taken only when something must change, and
    the check is repeated under the lock because another process may have just done the work.
    """
    version = read_schema_version(conn)
    if version == SCHEMA_VERSION:
        return
    refuse_newer(version)
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = read_schema_version(conn)
        refuse_newer(version)
        if version is None:
            _refuse_foreign_database(conn)
            for statement in DDL:
                conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif version < SCHEMA_VERSION:
            migrate(conn, version)
            conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def refuse_newer(version: int | None) -> None:
    if version is not None and version > SCHEMA_VERSION:
        raise StoreError(
            f"it has schema version {version}, written by a newer trainscale (this one reads "
            f"up to {SCHEMA_VERSION}); upgrade trainscale or pass another --store"
        )


def _refuse_foreign_database(conn: sqlite3.Connection) -> None:
    # Adding our tables to some other program's database would be a surprising side effect.
    foreign = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN "
        "('meta', 'runs', 'epochs', 'step_times', 'sweeps', 'probes') "
        "AND name NOT LIKE 'sqlite_%' LIMIT 1"
    ).fetchone()
    if foreign is not None:
        raise StoreError(
            f"it is an SQLite database of another program (table {foreign[0]!r}), "
            "not a trainscale results store"
        )
