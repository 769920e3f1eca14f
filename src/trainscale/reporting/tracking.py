"""What the bridges to other tracking tools share: the stored runs they read, the extras
they need, and how a run's config, curves and figures become named values.

`mlflow_export` (MLflow runs) and `tensorboard_export` (TensorBoard event files) each write
the same three series of a stored run, read here once:

- the per-step step times (`step_time_s`, step = the stored step index, from 0);
- the per-epoch rows (`epoch/<field>`, step = the epoch number);
- the summary's figures: every number of the stored summary, and the numbers of its dicts
  under dotted names (`breakdown_s.forward`); lists (the accuracy curve, per-worker memory)
  stay in the run's JSON export.

Loss and accuracy figures of a synthetic-data run are left out, as everywhere else in
trainscale: they measure nothing (docs/methodology.md).
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from trainscale.errors import ConfigError
from trainscale.reporting.listing import flatten, open_for_reading, select_runs
from trainscale.results.export import export_runs
from trainscale.results.records import RunRecord
from trainscale.results.schema import EPOCH_FIELDS

EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mlflow": ("MLflow", ("mlflow", "sqlalchemy", "alembic")),
    "tensorboard": ("TensorBoard", ("tensorboard",)),
}
"""Each tool's pip extra: its name in messages and the modules it must find. MLflow's
SQLite store (its default since 3.x) needs SQLAlchemy and Alembic beside mlflow-skinny."""

STEP_TIME = "step_time_s"
"""The name of the per-step series."""
EPOCH_PREFIX = "epoch/"
"""The prefix of the per-epoch series' names."""
NO_CLAIM_ON_SYNTHETIC = frozenset(
    {"train_loss", "test_loss", "test_accuracy", "test_macro_f1", "time_to_target_s"}
)
"""Figures that measure nothing on synthetic data, left out of a synthetic run's export."""


@dataclass(frozen=True)
class StoredRun:
    """One stored run with its per-epoch rows and per-step times, as the bridges read it."""

    record: RunRecord
    epochs: list[dict[str, Any]] = field(default_factory=list)
    step_times_s: list[float] = field(default_factory=list)

    @property
    def synthetic(self) -> bool:
        """Trained on synthetic data: its loss and accuracy figures are left out."""
        return self.record.data_kind == "synthetic"

    def step_series(self) -> list[tuple[int, float]]:
        """(step index from 0, step time in s), in step order."""
        return list(enumerate(self.step_times_s))

    def epoch_series(self) -> dict[str, list[tuple[int, float]]]:
        """`epoch/<field>` -> (epoch number, value) for each stored per-epoch field."""
        series: dict[str, list[tuple[int, float]]] = {}
        for name in EPOCH_FIELDS:
            if self.synthetic and name in NO_CLAIM_ON_SYNTHETIC:
                continue
            points = [
                (int(row["epoch"]), float(row[name]))
                for row in self.epochs
                if row[name] is not None
            ]
            if points:
                series[EPOCH_PREFIX + name] = points
        return series

    def summary_figures(self) -> dict[str, float]:
        """The summary's numbers by (dotted) name; see the module docstring."""
        figures = {}
        for name, value in flatten(self.record.summary).items():
            if name.split(".")[0] in NO_CLAIM_ON_SYNTHETIC and self.synthetic:
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                figures[name] = float(value)
        return figures

    def config_values(self) -> dict[str, Any]:
        """The resolved config, nested values under dotted names (the settings of the run)."""
        return flatten(self.record.config)

    def json_export(self, out: TextIO) -> None:
        """The run as `trainscale runs export --format json` writes it (a list of one)."""
        rows = self.epochs
        export_runs([self.record], "json", out, epochs_of=lambda _run_id: rows)

    def label(self) -> str:
        """A few words a person recognises the run by: 'mnist-cnn 2x1 b64 fp32'."""
        record = self.record
        words = [record.workload or "unknown"]
        if record.framework != "pytorch":
            words.append(record.framework)
        if record.world_size is not None:
            words.append(f"{record.world_size}x{record.threads_per_worker or '?'}")
        if record.global_batch_size is not None:
            words.append(f"b{record.global_batch_size}")
        if record.precision:
            words.append(record.precision)
        if self.synthetic:
            words.append("synthetic")
        return " ".join(words)

    def exported(self, action: str, target: str) -> ExportedRun:
        """What was done with this run: `action` ('created', ...) to `target`."""
        return ExportedRun(self.record.run_id, self.label(), self.record.status, action, target)

    def started_s(self) -> float:
        """When the run was registered, seconds since the epoch."""
        return _timestamp(self.record.created_at)

    def finished_s(self) -> float | None:
        """When it completed or failed, seconds since the epoch; None while running."""
        finished = self.record.finished_at
        return _timestamp(finished) if finished else None


@dataclass(frozen=True)
class ExportedRun:
    """What an export did with one stored run."""

    run_id: str
    label: str
    """`StoredRun.label()`: the run in a few words."""
    status: str
    """The stored run's status."""
    action: str
    """'created', 'replaced' (an earlier, different or unfinished export of it was
    replaced) or 'skipped' (already exported as it is)."""
    target: str
    """Where it went: 'MLflow run <id>', or the TensorBoard run directory."""

    def line(self, tool: str) -> str:
        """The progress line of this run: 'mlflow: 1a2b3c4d mnist-cnn 1x1 (completed):
        created MLflow run ...'."""
        return (
            f"{tool}: {self.run_id[:8]} {self.label} ({self.status}): {self.action} {self.target}"
        )


OnRun = Callable[[ExportedRun], None]
"""Told about each run as soon as it is exported (the command prints a progress line)."""


def require_extra(tool: str) -> None:
    """ConfigError (one line, with the pip command) unless `tool`'s extra is installed.

    Found without importing anything, so the check is cheap and comes before any write."""
    name, modules = EXTRAS[tool]
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        raise ConfigError(
            f"exporting to {name} needs {', '.join(missing)}, which is not installed: "
            f"pip install 'trainscale[{tool}]'"
        )


def load_runs(
    store: str | Path | None = None,
    *,
    run_ids: Sequence[str] = (),
    workload: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    limit: int | None = None,
) -> list[StoredRun]:
    """The stored runs to export, with their epochs and step times: the runs named by id
    (or unique prefix), in the order given, or else those matching the filters, newest
    first (`listing.select_runs`)."""
    with open_for_reading(store) as opened:
        records = select_runs(opened, run_ids, workload, status, tag, limit)
        return [StoredRun(r, opened.epochs(r.run_id), opened.step_times(r.run_id)) for r in records]


def dir_name(run: StoredRun) -> str:
    """A file name a person recognises: 'mnist-cnn_2x1_b64_fp32_1a2b3c4d'."""
    text = re.sub(r"[^A-Za-z0-9.+-]+", "_", run.label()).strip("_.")
    return f"{text}_{run.record.short_id}"


def value_text(value: Any) -> str:
    """A config value as text: strings as they are, everything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return json.dumps(value, sort_keys=True, default=str)


def _timestamp(iso: str) -> float:
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    if moment.tzinfo is None:  # stored times are UTC
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()
