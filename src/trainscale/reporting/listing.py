"""The stored runs and sweeps as text: what `trainscale runs list`, `show`, `export` and
`sweeps` print.

Each function reads the store (never creating one: a mistyped path says so instead of
showing an empty list; runs whose process is gone are marked failed first) and returns the
records with their cells, strings ready for a table. Accuracy and time to target are never
shown for synthetic data (see the measurement rules); a run stored as busy (other work used
its cores) says so beside its status. A script run also says how long its steps waited for
their data (and, past a tenth of the step, that it is input-bound), where its ranks
disagreed, and the frameworks its script used (`script_notes`).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from trainscale.errors import ConfigError
from trainscale.hardware.contention import BUSY, Contention
from trainscale.metrics.run_flags import ran_busy, stall_text
from trainscale.reporting.script_notes import (
    data_wait_text,
    disagreement_text,
    frameworks_text,
    is_input_bound,
    threads_text,
)
from trainscale.results.export import SUMMARY_KEYS, export_runs, run_json_object
from trainscale.results.outputs import write_atomically
from trainscale.results.owner import is_here
from trainscale.results.records import RunRecord, SweepRecord
from trainscale.results.schema import EPOCH_FIELDS, RUN_STATUSES
from trainscale.results.script_figures import ScriptFigures
from trainscale.results.store import RunStore, default_store_path

RUN_COLUMNS = (
    ("run", "left"),
    ("created (UTC)", "left"),
    ("workload", "left"),
    ("framework", "left"),
    ("status", "left"),
    ("data", "left"),
    ("device", "left"),
    ("workers x threads", "right"),
    ("precision", "left"),
    ("samples/s", "right"),
    ("test acc", "right"),
    ("to target (s)", "right"),
    ("note", "left"),
)
"""The columns of a list of runs, and how each is justified."""

SWEEP_COLUMNS = (
    ("sweep", "left"),
    ("created (UTC)", "left"),
    ("name", "left"),
    ("source", "left"),
    ("runs done/planned", "right"),
)
"""The columns of a list of sweeps, and how each is justified."""


def open_for_reading(store: str | Path | None = None) -> RunStore:
    """The store at `store` (default: the usual one), which must exist; stale runs failed."""
    return RunStore(
        store if store is not None else default_store_path(), create=False, fail_stale=True
    )


@dataclass
class RunList:
    """Stored runs, newest first, as asked for."""

    store: Path
    records: list[RunRecord]
    filtered: bool
    """A filter was given (so an empty list says 'match the filters')."""

    @property
    def empty_message(self) -> str:
        return f"no runs in {self.store}" + (" match the filters" if self.filtered else "")

    @property
    def several_hosts(self) -> bool:
        """Whether the runs come from more than one host (runs imported from another
        machine's store): the list then says which."""
        return len({record.machine.hostname for record in self.records}) > 1

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        """`RUN_COLUMNS`, with a host column after the device where there are several."""
        if not self.several_hosts:
            return RUN_COLUMNS
        at = [header for header, _ in RUN_COLUMNS].index("device") + 1
        return (*RUN_COLUMNS[:at], ("host", "left"), *RUN_COLUMNS[at:])

    def rows(self) -> list[dict[str, str]]:
        """One row of cells per run, keyed by `columns`' headers."""
        rows = [
            dict(zip((c for c, _ in RUN_COLUMNS), run_cells(r), strict=True)) for r in self.records
        ]
        if not self.several_hosts:
            return rows
        headers = [header for header, _ in self.columns]
        hosts = [text(record.machine.hostname) for record in self.records]
        return [
            {header: host if header == "host" else row[header] for header in headers}
            for row, host in zip(rows, hosts, strict=True)
        ]


def list_runs(
    store: str | Path | None = None,
    *,
    workload: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    limit: int | None = None,
) -> RunList:
    """The stored runs that match every filter given, at most `limit`, newest first."""
    workload = stored_name(workload)
    with open_for_reading(store) as opened:
        records = opened.list_runs(workload, status, tag, limit)
        path = opened.path
    return RunList(path, records, any(v is not None for v in (workload, status, tag)))


def run_cells(record: RunRecord) -> list[str]:
    """The cells of one run in a list of runs (`RUN_COLUMNS`)."""
    return [
        record.short_id,
        short_time(record.created_at),
        text(record.workload),
        _framework_cell(record),
        status_text(record) + (" (busy)" if ran_busy(record.summary) else ""),
        text(record.data_kind),
        # A GPU run's one process of N host threads reads as a CPU run's without it.
        record.settings.device,
        f"{text(record.world_size)} x {text(record.threads_per_worker)}",
        text(record.precision),
        number(record.figures.samples_per_s, ".1f"),
        accuracy_cell(record),
        time_to_target_cell(record),
        _note_cell(record),
    ]


def _framework_cell(record: RunRecord) -> str:
    """The run's framework; for a script run that used several, each of them ('pytorch+jax')."""
    seen = ScriptFigures.of(record.summary).frameworks
    return "+".join(seen) if len(seen) > 1 else record.framework


FAILURE_NOTE_CHARS = 60
"""How much of a failed run's reason its row shows (`runs show` has all of it)."""


def _note_cell(record: RunRecord) -> str:
    """Why a failed run failed, in short; stalls, an input-bound script, ranks that
    disagreed: what the figures beside it hide."""
    summary = record.summary
    notes = [stall_text(summary) or ""]
    if record.status == "failed" and record.error:
        notes.insert(0, textwrap.shorten(record.error, FAILURE_NOTE_CHARS, placeholder="..."))
    if is_input_bound(summary):
        share = ScriptFigures.of(summary).data_wait_share
        notes.append(f"input-bound: data wait {share:.0%} of the step")
    if disagreement_text(summary):
        notes.append("ranks disagree (runs show)")
    return "; ".join(n for n in notes if n)


@dataclass
class RunDetails:
    """One stored run with its epochs, as sections of key/value lines."""

    record: RunRecord
    epochs: list[dict[str, Any]]

    @property
    def status(self) -> str:
        """The run's status (`status_text`)."""
        return status_text(self.record)

    def to_dict(self) -> dict[str, Any]:
        """The run as `runs export --format json` writes it: its stored object and epochs."""
        return run_json_object(self.record, self.epochs)

    def contention_text(self) -> str | None:
        """The contention verdict and why; for a busy run, the figures and what it changes.
        None for a run stored without one."""
        contention = Contention.from_summary(self.record.summary)
        if contention is None:
            return None
        if contention.verdict != BUSY:
            return f"{contention.verdict}: {contention.reason}"
        return (
            f"BUSY machine: {contention.reason} ({contention.figures()}); its speed is not "
            "trusted: kept out of recommendations and speedup verdicts"
        )

    def overview(self) -> dict[str, str]:
        record = self.record
        values = {
            "created": record.created_at,
            "finished": record.finished_at,
            "workload": record.workload,
            "framework": frameworks_text(record.summary) or record.framework_text,
            "data": record.data_kind,
            "workers": record.world_size,
            "threads per worker": record.threads_per_worker,
            "affinity": record.affinity,
            "precision": record.precision,
            "global batch size": record.global_batch_size,
            "tag": record.tag,
            "owner": record.owner.describe() if record.owner else None,
            "contention": self.contention_text(),
            "schema version": record.schema_version,
        }
        stalls = stall_text(record.summary)
        if stalls:  # the mean beside the median, where a few long steps pull them apart
            values["note"] = stalls
        # A script run's own lines, only where they apply.
        for key, line in (
            ("data wait", data_wait_text(record.summary)),
            ("ranks disagree", disagreement_text(record.summary)),
            ("threads", threads_text(record.summary)),
        ):
            if line:
                values[key] = line
        return value_texts(values)

    def summary(self) -> dict[str, str]:
        """The headline metrics first, in their usual order, then whatever else was recorded."""
        summary = self.record.summary
        known = {key: summary[key] for key in SUMMARY_KEYS if key in summary}
        return value_texts({**known, **summary})

    def epoch_table(self) -> tuple[list[tuple[str, str]], list[list[str]]]:
        """(columns, rows) of the per-epoch table; columns as (header, justify)."""
        rows = [
            [str(row["epoch"]), *(number(row.get(field), ".4f") for field in EPOCH_FIELDS)]
            for row in self.epochs
        ]
        return [(header, "right") for header in ("epoch", *EPOCH_FIELDS)], rows

    def sections(self) -> dict[str, dict[str, str] | None]:
        """The config and environment as dotted keys (None: not recorded)."""
        values = {"config": self.record.config, "environment": self.record.env}
        return {name: value_texts(flatten(v)) if v else None for name, v in values.items()}


def run_details(run_id: str, store: str | Path | None = None) -> RunDetails:
    """The run with id (or unique prefix) `run_id`, and its epochs."""
    with open_for_reading(store) as opened:
        record = opened.get_run(run_id)
        return RunDetails(record, opened.epochs(record.run_id))


@dataclass
class SweepList:
    """Stored sweeps, newest first, with how many of their planned runs completed."""

    store: Path
    sweeps: list[SweepRecord]
    done: dict[str, int]

    def to_dicts(self) -> list[dict[str, Any]]:
        """Every sweep as plain data (`--json`): what its row shows, its spec and its plan."""
        return [
            {
                "sweep_id": sweep.sweep_id,
                "name": sweep.name,
                "created_at": sweep.created_at,
                "source": sweep.source,
                "planned": len(sweep.plan),
                "completed": self.done.get(sweep.sweep_id, 0),
                "spec_hash": sweep.spec_hash,
                "spec": sweep.spec,
                "plan": sweep.plan,
            }
            for sweep in self.sweeps
        ]

    def rows(self) -> list[list[str]]:
        """One row of cells per sweep (`SWEEP_COLUMNS`)."""
        return [
            [
                sweep.short_id,
                short_time(sweep.created_at),
                # One line each, whatever a multi-line TOML string put there.
                " ".join(sweep.name.split()),
                " ".join(sweep.source.split()),
                f"{self.done.get(sweep.sweep_id, 0)}/{len(sweep.plan)}",
            ]
            for sweep in self.sweeps
        ]


def list_sweeps(store: str | Path | None = None, limit: int | None = None) -> SweepList:
    """The stored sweeps, at most `limit`, newest first."""
    with open_for_reading(store) as opened:
        return SweepList(opened.path, opened.list_sweeps(limit), opened.sweep_progress())


def export_stored_runs(
    fmt: str,
    out: Path | TextIO,
    store: str | Path | None = None,
    *,
    run_ids: Sequence[str] = (),
    workload: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    limit: int | None = None,
) -> int:
    """Write the stored runs named by id, or else those that match the filters, as `fmt`
    (`EXPORT_FORMATS`) to the file `out` (whole or not at all) or the open stream `out`;
    returns how many were written."""
    with open_for_reading(store) as opened:
        records = select_runs(opened, run_ids, workload, status, tag, limit)

        def write(stream: TextIO) -> None:
            export_runs(records, fmt, stream, epochs_of=opened.epochs)

        if isinstance(out, Path):
            write_atomically(out, write)
        else:
            write(out)
    return len(records)


def stored_name(workload: str | None) -> str | None:
    """The name runs are stored under for a workload filter: a custom workload's reference
    (`FILE.py:ATTR`) selects the runs of the workload it names; a training script
    (`train.py`), or a script run's stored name (`script:train.py`), the script's runs."""
    if workload is None:  # before the imports, which bring torch and its launcher
        return None
    from trainscale.runner.script_launch import is_script
    from trainscale.workloads import workload_name
    from trainscale.workloads.custom import is_reference

    if not is_reference(workload) or workload.startswith("script:"):
        return workload
    if is_script(workload):  # never imported as a workload file: that would run the script
        return f"script:{Path(workload).name}"
    return workload_name(workload)


def check_run_filters(status: str | None, limit: int | None) -> None:
    """ConfigError (one line) for a status or a limit no run can match."""
    if status is not None and status not in RUN_STATUSES:
        raise ConfigError(f"status must be one of {', '.join(RUN_STATUSES)}; got {status!r}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a whole number >= 1, got {limit!r}")


def select_runs(
    opened: RunStore,
    run_ids: Sequence[str],
    workload: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    limit: int | None = None,
) -> list[RunRecord]:
    """The runs named by id (or unique prefix) in the order given, each once; or, without
    ids, those matching the filters, newest first. Ids and filters together are a
    ConfigError: a named run that a filter left out would vanish without a word."""
    check_run_filters(status, limit)
    if not run_ids:
        return opened.list_runs(stored_name(workload), status, tag, limit)
    if any(value is not None for value in (workload, status, tag, limit)):
        raise ConfigError("select runs by id or by --workload/--status/--tag/--limit, not both")
    return list({r.run_id: r for r in map(opened.get_run, run_ids)}.values())


# -- cells ---------------------------------------------------------------------------------


def flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys, so that config and environment read as key/value lines."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def value_texts(values: dict[str, Any]) -> dict[str, str]:
    """Every value as its text (`value_text`), keys as strings."""
    return {str(key): value_text(str(key), value) for key, value in values.items()}


def value_text(key: str, value: Any) -> str:
    """A stored value as text: '-' for none, sizes in MiB (keys with 'bytes'), floats in 6
    significant digits, lists and dicts as JSON."""
    if value is None:
        return "-"
    if "bytes" in key:
        if isinstance(value, list):
            return ", ".join(_bytes(v) for v in value)
        return _bytes(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def _bytes(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value / 2**20:.1f} MiB"


def number(value: Any, spec: str) -> str:
    """A number in format `spec`, or '-' for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return format(value, spec)


def text(value: Any) -> str:
    return "-" if value is None else str(value)


def short_time(iso: str) -> str:
    """'2025-01-02T12:34:56.789+00:00' -> '2025-01-02 12:34' (UTC, as the headers say)."""
    return iso[:16].replace("T", " ")


def status_text(record: RunRecord) -> str:
    """The status; for a run still running on another machine, which one (this one could
    not tell whether it is still alive: stale runs are only found on their own host)."""
    owner = record.owner
    if record.status == "running" and owner is not None and not is_here(owner):
        return f"running on {owner.host}"
    return record.status


def accuracy_cell(record: RunRecord) -> str:
    # No accuracy claim from synthetic data (see the measurement rules).
    if record.data_kind == "synthetic":
        return "-"
    return number(record.figures.test_accuracy, ".4f")


def time_to_target_cell(record: RunRecord) -> str:
    # An emulation's clock is one process's, no time N workers take (docs/emulation.md).
    if record.data_kind == "synthetic" or record.status != "completed" or record.is_emulation:
        return "-"
    figures = record.figures
    if figures.time_to_target_s is None:
        # "missed" only where the run was evaluated: a --no-eval run never looked.
        evaluated = figures.test_accuracy is not None
        return "missed" if evaluated and figures.target_accuracy is not None else "-"
    return number(figures.time_to_target_s, ".1f")
