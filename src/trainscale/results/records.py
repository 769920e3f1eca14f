"""What the results store hands out: typed records of its runs, sweeps and probes, read
from their rows (a row whose JSON cannot be read is never handed out half-read), and how
their JSON columns are written."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from trainscale.errors import StoreError
from trainscale.results.owner import Owner, decode_host
from trainscale.results.stored_figures import StoredFigures
from trainscale.results.stored_machine import StoredMachine
from trainscale.results.stored_settings import StoredSettings


@dataclass(frozen=True)
class DamagedRow:
    """A stored row whose JSON columns cannot all be read (edited by hand, cut short by a
    disk error). The store never hands out such a row half-read: listings leave it out and
    name it, and asking for it by id is a `DamagedRecordError`."""

    kind: str
    """'run', 'sweep' or 'probe'."""
    ident: str
    """Its full id."""
    columns: tuple[str, ...]
    """The JSON columns that cannot be parsed, e.g. ('config_json',)."""

    def describe(self, *, full_id: bool = False) -> str:
        """'run 1a2b3c4d has damaged stored JSON (config_json)'."""
        ident = self.ident if full_id else self.ident[:8]
        return f"{self.kind} {ident} has damaged stored JSON ({', '.join(self.columns)})"


class DamagedRecordError(StoreError):
    """The run, sweep or probe asked for by id is a damaged row."""

    def __init__(self, damaged: DamagedRow) -> None:
        super().__init__(f"{damaged.describe(full_id=True)}; it cannot be read")
        self.damaged = damaged


@dataclass(frozen=True)
class RunRecord:
    """One stored run: the `runs` row with its JSON columns parsed."""

    run_id: str
    """Unique id; commands accept any unique prefix of it."""
    created_at: str
    """ISO 8601 UTC time the run was registered."""
    finished_at: str | None
    """ISO 8601 UTC time the run completed or failed; None while running."""
    status: str
    """'running', 'completed' or 'failed'."""
    error: str | None
    """Why a failed run failed."""
    workload: str | None
    """Registered workload name (None only for a failure recorded before the run was known)."""
    data_kind: str | None
    """'real' or 'synthetic'; accuracy from synthetic data means nothing."""
    world_size: int | None
    """Number of worker processes."""
    threads_per_worker: int | None
    """Intra-op threads in each worker."""
    affinity: str | None
    """CPU affinity plan, as the launcher describes it."""
    precision: str | None
    """Numeric precision, e.g. 'fp32' or 'bf16'."""
    global_batch_size: int | None
    """Samples per optimizer step, summed over workers."""
    tag: str | None
    """Free label used to group runs (a sweep name, an experiment)."""
    config: dict[str, Any]
    """The resolved run configuration."""
    env: dict[str, Any]
    """The environment the run saw (hardware, versions, affinity map)."""
    summary: dict[str, Any]
    """Headline metrics of a completed run (empty otherwise)."""
    schema_version: int
    """Schema version the run was written with."""
    sweep_id: str | None = None
    """The sweep this run belongs to (None for a run made on its own)."""
    sweep_item: int | None = None
    """Its index in the sweep's plan."""
    config_hash: str | None = None
    """Hash of its resolved config (tag excluded): equal hashes, equal settings."""
    repeat_index: int | None = None
    """Which repeat of its configuration it is, from 0."""
    owner_host: str | None = None
    """Host name of the process that created the run (None before schema 4)."""
    owner_pid: int | None = None
    """Its pid."""
    owner_started: float | None = None
    """Its start time, seconds since the epoch (tells a reused pid apart)."""
    owner_boot_id: str | None = None
    """Its machine's boot id (None where not recorded); see `results.owner`."""
    owner_pid_ns: int | None = None
    """Its pid namespace's inode (None where not recorded)."""

    @property
    def short_id(self) -> str:
        """The first 8 characters of the run id, as shown in tables."""
        return self.run_id[:8]

    @cached_property
    def settings(self) -> StoredSettings:
        """Its settings as readers ask about them, typed (`results.stored_settings`)."""
        return StoredSettings.of(self.config)

    @cached_property
    def figures(self) -> StoredFigures:
        """Its summary's figures as readers compute with them, typed
        (`results.stored_figures`)."""
        return StoredFigures.of(self.summary)

    @cached_property
    def machine(self) -> StoredMachine:
        """The machine it ran on as readers ask about it, typed (`results.stored_machine`)."""
        return StoredMachine.of(self.env)

    @property
    def is_emulation(self) -> bool:
        """Whether it is an accuracy emulation (one process standing in for N workers,
        docs/emulation.md): its clock is that process's, not N workers'."""
        return (
            "emulation" in self.summary
            or "emulation" in self.config
            or (self.tag or "").startswith("emulate:")
        )

    @property
    def framework(self) -> str:
        """The framework that trained it ('pytorch' for runs stored before frameworks)."""
        return self.settings.framework

    @property
    def framework_version(self) -> str | None:
        """The release of its framework the run recorded (torch's, for a PyTorch run stored
        before frameworks recorded theirs)."""
        version = self.machine.framework_version
        if version is None and self.framework == "pytorch":
            version = self.machine.torch_version
        return version

    @property
    def framework_text(self) -> str:
        """The framework and its release as the run recorded them: 'tensorflow 2.21.0'."""
        version = self.framework_version
        text = self.framework
        if self.settings.single_process:
            text += " (single process)"
        return f"{text} {version}" if version else text

    @property
    def owner(self) -> Owner | None:
        """The process that created the run and, while it is 'running', owns it."""
        if self.owner_host is None or self.owner_pid is None or self.owner_started is None:
            return None
        return Owner(
            self.owner_host,
            self.owner_pid,
            self.owner_started,
            self.owner_boot_id,
            self.owner_pid_ns,
        )


@dataclass(frozen=True)
class SweepRecord:
    """One stored sweep: its normalised spec and its plan of runs."""

    sweep_id: str
    name: str
    created_at: str
    source: str
    """Where the spec came from: a file path, or 'recipe:NAME'."""
    spec_hash: str
    """Hash of the normalised spec: a resumed sweep is found by it."""
    spec: dict[str, Any]
    plan: list[dict[str, Any]]
    """The planned runs in execution order: each with `item`, `label`, `options`,
    `config_hash` and `repeat`."""

    @property
    def short_id(self) -> str:
        return self.sweep_id[:8]


@dataclass(frozen=True)
class ProbeRecord:
    """One stored hardware measurement of `trainscale probe`."""

    probe_id: str
    created_at: str
    kind: str
    """'matmul', 'dispatch', 'transfer' or 'allreduce'."""
    host: str | None
    device_type: str | None
    """'cpu' or 'cuda'."""
    device: str | None
    """The CPU model or the GPU name it measured."""
    workers: int | None
    """Processes of an all-reduce (None for the other kinds)."""
    result: dict[str, Any]
    env: dict[str, Any]
    schema_version: int

    @property
    def short_id(self) -> str:
        return self.probe_id[:8]


def _json_default(value: Any) -> Any:
    """Encode the non-JSON values a config or summary tends to hold, rather than lose a run."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot store a {type(value).__name__} in a run record: {value!r}")


def dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default, sort_keys=True)


def loads_object(text: str | None) -> dict[str, Any]:
    """A JSON object column as a dict; ValueError (or TypeError) when it is not JSON."""
    if not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {"value": value}


def _load_plan(text: str) -> list[dict[str, Any]]:
    """A sweep's plan column: a JSON list of objects, or ValueError."""
    plan = json.loads(text)
    if not isinstance(plan, list) or not all(isinstance(item, dict) for item in plan):
        raise ValueError("a sweep plan is a list of objects")
    return plan


def _parsed(
    kind: str,
    row: sqlite3.Row,
    id_column: str,
    columns: Mapping[str, Callable[[Any], Any]],
) -> dict[str, Any]:
    """Each JSON column of `row` parsed by its reader; DamagedRecordError naming every
    column that cannot be read, so the row is never handed out half-read."""
    parsed: dict[str, Any] = {}
    damaged: list[str] = []
    for column, read in columns.items():
        try:
            parsed[column] = read(row[column])
        # JSONDecodeError and UnicodeDecodeError are ValueErrors; TypeError is a non-text
        # value (a number or a blob written by another tool); RecursionError absurd nesting.
        except (ValueError, TypeError, RecursionError):
            damaged.append(column)
    if damaged:
        raise DamagedRecordError(DamagedRow(kind, str(row[id_column]), tuple(damaged)))
    return parsed


_RUN_JSON = {"config_json": loads_object, "env_json": loads_object, "summary_json": loads_object}
_SWEEP_JSON = {"spec_json": loads_object, "plan_json": _load_plan}
_PROBE_JSON = {"result_json": loads_object, "env_json": loads_object}


def run_record(row: sqlite3.Row) -> RunRecord:
    parsed = _parsed("run", row, "run_id", _RUN_JSON)
    return RunRecord(
        run_id=row["run_id"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        status=row["status"],
        error=row["error"],
        workload=row["workload"],
        data_kind=row["data_kind"],
        world_size=row["world_size"],
        threads_per_worker=row["threads_per_worker"],
        affinity=row["affinity"],
        precision=row["precision"],
        global_batch_size=row["global_batch_size"],
        tag=row["tag"],
        config=parsed["config_json"],
        env=parsed["env_json"],
        summary=parsed["summary_json"],
        schema_version=row["schema_version"],
        sweep_id=row["sweep_id"],
        sweep_item=row["sweep_item"],
        config_hash=row["config_hash"],
        repeat_index=row["repeat_index"],
        owner_pid=row["owner_pid"],
        owner_started=row["owner_started"],
        **_owner_host_fields(row["owner_host"]),
    )


def record_owner(row: sqlite3.Row) -> Owner:
    """The owner of a row read with owner_host, owner_pid and owner_started."""
    host, boot_id, pid_ns = decode_host(row["owner_host"])
    return Owner(host, row["owner_pid"], row["owner_started"], boot_id, pid_ns)


def _owner_host_fields(text: str | None) -> dict[str, Any]:
    """RunRecord's owner_host, owner_boot_id and owner_pid_ns from the stored column."""
    if text is None:
        return {"owner_host": None}
    host, boot_id, pid_ns = decode_host(text)
    return {"owner_host": host, "owner_boot_id": boot_id, "owner_pid_ns": pid_ns}


def probe_record(row: sqlite3.Row) -> ProbeRecord:
    parsed = _parsed("probe", row, "probe_id", _PROBE_JSON)
    return ProbeRecord(
        probe_id=row["probe_id"],
        created_at=row["created_at"],
        kind=row["kind"],
        host=row["host"],
        device_type=row["device_type"],
        device=row["device"],
        workers=row["workers"],
        result=parsed["result_json"],
        env=parsed["env_json"],
        schema_version=row["schema_version"],
    )


def sweep_record(row: sqlite3.Row) -> SweepRecord:
    parsed = _parsed("sweep", row, "sweep_id", _SWEEP_JSON)
    return SweepRecord(
        sweep_id=row["sweep_id"],
        name=row["name"],
        created_at=row["created_at"],
        source=row["source"],
        spec_hash=row["spec_hash"],
        spec=parsed["spec_json"],
        plan=parsed["plan_json"],
    )
