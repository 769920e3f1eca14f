"""Stored runs as flat JSON objects or CSV rows, for spreadsheets, notebooks and other tools."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from trainscale.hardware.contention import Contention
from trainscale.hardware.figures import HardwareFigures
from trainscale.results.csv_cells import write_csv
from trainscale.results.records import RunRecord
from trainscale.results.run_result import RunMetrics, field_names

SUMMARY_KEYS = field_names(RunMetrics)
"""A training run's measurements (`RunMetrics`), always present in an export (null when a
run did not record one), throughput first."""

CONTENTION_FIELDS = (
    "verdict",
    "other_cores_busy_run_cores",
    "other_cores_busy",
    "steal_fraction",
    "load_avg_max",
    "reason",
)
"""The fields of a run's `Contention` an export carries flat, as `contention_<field>`: the
verdict (quiet, busy, unknown; null for a run stored without one), its figures and why."""
CONTENTION_COLUMNS = tuple(f"contention_{name}" for name in CONTENTION_FIELDS)

CSV_COLUMNS = (
    "run_id",
    "created_at",
    "finished_at",
    "workload",
    "framework",
    "framework_version",
    "single_process",
    "status",
    "data",
    "world_size",
    "threads_per_worker",
    "affinity",
    "precision",
    "global_batch_size",
    "tag",
    "sweep_id",
    "config_hash",
    "repeat_index",
    *CONTENTION_COLUMNS,
    *field_names(RunMetrics, numbers_only=True),
    "peak_memory_bytes_max",
    *field_names(HardwareFigures, numbers_only=True),
    "cpu_model",
    "torch_version",
    "error",
)
"""CSV header: scalar columns only, each a field of the typed result (`RunMetrics`,
`HardwareFigures`, `Contention`, `Environment`); per-worker memory becomes its maximum."""

EXPORT_FORMATS = ("csv", "json")


def run_to_json_dict(record: RunRecord) -> dict[str, Any]:
    """One run as a flat, strict-JSON-ready dict (NaN and infinities become null).

    Keys: the run's columns (`data` is the data kind), the `CONTENTION_COLUMNS`, every key of
    `SUMMARY_KEYS`, any other summary keys the run recorded, then `env`, `config` and
    `schema_version`.
    """
    flat: dict[str, Any] = {
        "run_id": record.run_id,
        "created_at": record.created_at,
        "finished_at": record.finished_at,
        "workload": record.workload,
        "framework": record.framework,
        "framework_version": record.framework_version,
        "single_process": record.settings.single_process,
        "status": record.status,
        "error": record.error,
        "data": record.data_kind,
        "world_size": record.world_size,
        "threads_per_worker": record.threads_per_worker,
        "affinity": record.affinity,
        "precision": record.precision,
        "precision_reason": record.settings.precision_reason,
        "global_batch_size": record.global_batch_size,
        "tag": record.tag,
        "sweep_id": record.sweep_id,
        "config_hash": record.config_hash,
        "repeat_index": record.repeat_index,
    }
    contention = Contention.from_summary(record.summary or {})
    for name, column in zip(CONTENTION_FIELDS, CONTENTION_COLUMNS, strict=True):
        flat[column] = getattr(contention, name) if contention is not None else None
    for key in SUMMARY_KEYS:
        flat[key] = record.summary.get(key)
    for key, value in record.summary.items():
        flat.setdefault(key, value)
    flat["env"] = record.env
    flat["config"] = record.config
    flat["schema_version"] = record.schema_version
    return finite_or_none(flat)


def run_to_csv_row(record: RunRecord) -> dict[str, Any]:
    """One run as a dict over `CSV_COLUMNS` with scalar values (None for unknown)."""
    flat = run_to_json_dict(record)
    row = {key: flat.get(key) for key in CSV_COLUMNS}
    memory = flat.get("peak_memory_bytes_per_worker")
    if isinstance(memory, list):
        numbers = [m for m in memory if isinstance(m, (int, float))]
        row["peak_memory_bytes_max"] = max(numbers) if numbers else None
    elif isinstance(memory, (int, float)):
        row["peak_memory_bytes_max"] = memory
    row["cpu_model"] = record.machine.cpu_model
    row["torch_version"] = record.machine.torch_version
    for key, value in row.items():
        if isinstance(value, (list, dict)):
            # A summary key that is not scalar in this run: keep the cell, as JSON text.
            row[key] = json.dumps(value)
    return row


def export_runs(
    records: Iterable[RunRecord],
    fmt: str,
    out: TextIO,
    *,
    epochs_of: Callable[[str], list[dict[str, Any]]] | None = None,
) -> None:
    """Write runs to `out` as CSV (header + one row per run) or JSON (a list of objects).

    With `epochs_of` (e.g. `RunStore.epochs`), each JSON object also carries its `epochs`;
    CSV stays one row per run, and a text cell a spreadsheet would read as a formula is
    quote-prefixed (`write_csv`).
    """
    if fmt == "csv":
        write_csv(out, CSV_COLUMNS, (run_to_csv_row(record) for record in records))
    elif fmt == "json":
        items = [
            run_json_object(record, None if epochs_of is None else epochs_of(record.run_id))
            for record in records
        ]
        json.dump(items, out, indent=2, allow_nan=False)
        out.write("\n")
    else:
        raise ValueError(f"export format must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}")


def run_json_object(
    record: RunRecord, epochs: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A run's object of the JSON export: `run_to_json_dict`, with its `epochs` when given
    (a figure that is not finite is null, as JSON has no NaN)."""
    item = run_to_json_dict(record)
    if epochs is not None:
        item["epochs"] = finite_or_none(epochs)
    return item


def finite_or_none(value: Any) -> Any:
    """`value` with every float that is not finite, in its dicts and lists too, as None:
    strict JSON has no NaN, and a diverged loss is exported as null rather than breaking
    readers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):  # a tuple is a JSON list too
        return [finite_or_none(item) for item in value]
    return value
