"""Stored runs as MLflow runs (docs/tracking.md), through MLflow's own client.

Each stored run becomes one MLflow run in one experiment: its resolved config as params, what
it is as tags (`trainscale.run_id`, status, workload, host, the failure's reason), its step
times, per-epoch curve and summary figures as metrics (`reporting/tracking.py` says which), and
as artifacts its JSON export (`trainscale/run.json`) and, for a completed run, its report
(`trainscale/report/`: Markdown, HTML and the plots).

An MLflow run is found again by its `trainscale.run_id` tag, so exporting twice makes no
duplicate: a run already exported with the same status is skipped; an export of it that was
cut short, or made while its status was another ('running', then 'completed'), is deleted
and made anew ('replaced').

A tracking server that does not answer is given up on within `HTTP_WAIT_BOUND_S` (MLflow's
own retries would wait about four minutes), unless the user set MLflow's HTTP settings. A
failure part-way (a full disk, a run deleted by another export, a server gone) is one
`ExportFailed` line that says what was exported before it.

mlflow is imported only here and only when an export runs (`pip install 'trainscale[mlflow]'`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from trainscale.errors import ConfigError, TrainscaleError
from trainscale.reporting.aggregate import aggregate
from trainscale.reporting.html import render_html
from trainscale.reporting.markdown import render_markdown
from trainscale.reporting.plots import render_plots
from trainscale.reporting.tracking import (
    STEP_TIME,
    ExportedRun,
    OnRun,
    StoredRun,
    require_extra,
    value_text,
)

DEFAULT_EXPERIMENT = "trainscale"
RUN_ID_TAG = "trainscale.run_id"
EXPORTED_TAG = "trainscale.exported"
"""Set last, once everything of the run is logged: a run without it was cut short."""
ARTIFACT_DIR = "trainscale"
TRUNCATED = " ...[truncated: the full value is in trainscale/run.json]"
"""Ends a param or tag value cut to MLflow's length limit (6,000 and 8,000 characters)."""
_STATUS = {"completed": "FINISHED", "failed": "FAILED", "running": "RUNNING"}
HTTP_SETTINGS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}
"""MLflow's HTTP settings during an export, each where the user has not set it: 3 tries of
at most 10 s, 2 s of back-off between them (1 s more of jitter each), instead of MLflow's 8
tries of 120 s and up to 2 minutes of back-off."""
HTTP_WAIT_BOUND_S = 35
"""The longest a request to a server that does not answer takes under `HTTP_SETTINGS`."""
NOTICE_AFTER_S = 3.0
"""How long opening the tracking store may take before `notice` is told that it waits."""


class ExportFailed(TrainscaleError):
    """An export stopped part-way: the runs before it are exported, the failing one is not
    (its half-logged MLflow run is deleted where the store still allows it)."""

    def __init__(self, message: str, done: list[ExportedRun]) -> None:
        super().__init__(message)
        self.done = done
        """The runs exported before the failure."""


def export_mlflow(
    runs: Sequence[StoredRun],
    *,
    tracking_uri: str | None = None,
    experiment: str = DEFAULT_EXPERIMENT,
    on_run: OnRun | None = None,
    notice: Callable[[str], None] | None = None,
) -> list[ExportedRun]:
    """Log `runs` (from `tracking.load_runs`) to the MLflow experiment `experiment` (created
    if missing) at `tracking_uri` (default: $MLFLOW_TRACKING_URI, else MLflow's default,
    `sqlite:///mlflow.db`); returns what was done with each, telling `on_run` as it goes.
    `notice` is told, once, when opening the store takes more than `NOTICE_AFTER_S`.

    ConfigError (one line) when the extra is missing or the tracking store cannot be used,
    before anything is logged; ExportFailed (one line, `.done` the runs exported before)
    when the store fails part-way."""
    require_extra("mlflow")
    with _quiet_mlflow(), bounded_http():
        uri = tracking_uri_in_use(tracking_uri)
        waiting = f"waiting for the MLflow tracking store {shown_uri(uri)} (given up after about "
        waiting += f"{HTTP_WAIT_BOUND_S} s unless MLFLOW_HTTP_REQUEST_* say otherwise)"
        server = uri.startswith(("http://", "https://"))  # the bound is of HTTP requests
        with _notice_if_slow(notice if server else None, waiting):
            client, experiment_id = open_experiment(tracking_uri, experiment)
        done: list[ExportedRun] = []
        for run in runs:
            try:
                exported = _export_run(client, experiment_id, run)
            except _store_errors() as error:
                raise _failed(error, run, done, len(runs), uri) from None
            done.append(exported)
            if on_run is not None:
                on_run(exported)
    return done


def _failed(
    error: BaseException, run: StoredRun, done: list[ExportedRun], total: int, uri: str
) -> ExportFailed:
    """The one line of an export that stopped at `run`, saying what is exported."""
    before = f"{len(done)} of {total} runs exported before it" if done else "no run exported"
    return ExportFailed(
        f"MLflow export to {shown_uri(uri)} stopped at run {run.record.short_id} ({before}; "
        f"the same command exports the rest once this is fixed): {error_text(error)}",
        done,
    )


def error_text(error: BaseException) -> str:
    """The cause of a tracking store's error in a few words: SQLAlchemy's wrapped driver
    error without the SQL statement and its link, or the first line of the message."""
    cause = getattr(error, "orig", None) or error  # SQLAlchemy's DBAPIError wraps the driver's
    lines = str(cause).strip().splitlines() or [type(cause).__name__]
    text = lines[0]
    return text if len(text) <= 400 else text[:400] + " ..."


@contextlib.contextmanager
def bounded_http() -> Iterator[None]:
    """MLflow's HTTP settings of `HTTP_SETTINGS` while the block runs, each where the
    environment does not set it; MLflow reads them at every request."""
    added = [name for name in HTTP_SETTINGS if name not in os.environ]
    for name in added:
        os.environ[name] = HTTP_SETTINGS[name]
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextlib.contextmanager
def _notice_if_slow(notice: Callable[[str], None] | None, text: str) -> Iterator[None]:
    """Tell `notice` `text` if the block is still running after `NOTICE_AFTER_S`."""
    if notice is None:
        yield
        return
    timer = threading.Timer(NOTICE_AFTER_S, notice, (text,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def tracking_uri_in_use(tracking_uri: str | None = None) -> str:
    """`tracking_uri`, else the one MLflow uses by default ($MLFLOW_TRACKING_URI, ...)."""
    import mlflow

    return tracking_uri or mlflow.get_tracking_uri()


def open_experiment(tracking_uri: str | None, experiment: str) -> tuple[Any, str]:
    """MLflow's client for `tracking_uri` and the id of `experiment` (created if missing);
    ConfigError naming the store when it cannot be opened or the experiment used."""
    import mlflow

    uri = tracking_uri_in_use(tracking_uri)
    refuse_in_memory(uri)
    if not experiment.strip():
        raise ConfigError("the MLflow experiment name is empty; give a name")
    refuse_foreign_sqlite(uri)
    try:
        client = mlflow.MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(experiment)
        if found is None:
            return client, client.create_experiment(experiment)
    except ImportError as error:  # a database URI whose driver is not installed
        raise ConfigError(
            f"cannot use the MLflow tracking store {shown_uri(uri)}: its database driver is not "
            f"installed ({error}); install it into this environment (PostgreSQL: psycopg2-binary "
            "or psycopg, whichever the URI's driver names)"
        ) from None
    except _store_errors() as error:
        raise ConfigError(
            f"cannot use the MLflow tracking store {shown_uri(uri)}: {error_text(error)}"
        ) from None
    if found.lifecycle_stage != "active":
        raise ConfigError(
            f"MLflow experiment {experiment!r} at {shown_uri(uri)} is deleted; restore it or give "
            "another --experiment"
        )
    return client, found.experiment_id


def shown_uri(uri: str) -> str:
    """`uri` as printed: a password in it (`postgresql://user:secret@host/db`) becomes
    `***`, so that an error line or a log never carries it."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def refuse_in_memory(uri: str) -> None:
    """ConfigError when `uri` is an SQLite database that lives only while the command runs
    (`sqlite://`, `sqlite:///:memory:`, mode=memory, or SQLite's nameless temporary file):
    MLflow would accept it and everything exported would be gone when the command ends."""
    if not uri.startswith("sqlite:"):
        return
    path = uri.removeprefix("sqlite:").removeprefix("//").split("?")[0]
    if path in ("", "/", "/:memory:") or "mode=memory" in uri:
        raise ConfigError(
            f"MLflow tracking store {uri} is an in-memory database: everything exported "
            "would be lost when the command ends; give a file, e.g. sqlite:///mlflow.db"
        )


def refuse_foreign_sqlite(uri: str) -> None:
    """ConfigError when `uri` names an SQLite file that holds tables but is no MLflow store
    (a trainscale results store, say): MLflow would add its tables to it, unasked."""
    if not uri.startswith("sqlite:///"):
        return
    path = Path(uri.removeprefix("sqlite:///").split("?")[0])
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        with closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.DatabaseError as error:
        raise ConfigError(f"cannot use the MLflow tracking store {uri}: {error}") from None
    tables = {name for (name,) in rows}
    if tables and "alembic_version" not in tables:
        raise ConfigError(
            f"{path} is an SQLite file of another kind, not an MLflow store (tables: "
            f"{', '.join(sorted(tables)[:4])}); give --tracking-uri a new or an MLflow database"
        )


def _store_errors() -> tuple[type[BaseException], ...]:
    """What opening a tracking store raises for a store that cannot be used."""
    from mlflow.exceptions import MlflowException

    errors: list[type[BaseException]] = [MlflowException, OSError]
    with contextlib.suppress(ImportError):  # the SQL stores' own errors, where installed
        from sqlalchemy.exc import SQLAlchemyError

        errors.append(SQLAlchemyError)
    return tuple(errors)


def _export_run(client: Any, experiment_id: str, run: StoredRun) -> ExportedRun:
    from mlflow.entities import ViewType

    record = run.record
    earlier = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{RUN_ID_TAG}` = '{record.run_id}'",
        run_view_type=ViewType.ACTIVE_ONLY,
    )
    for old in earlier:
        tags = old.data.tags
        if tags.get(EXPORTED_TAG) == "true" and tags.get("trainscale.status") == record.status:
            return run.exported("skipped", f"MLflow run {old.info.run_id}")
    for old in earlier:
        client.delete_run(old.info.run_id)
    created = client.create_run(
        experiment_id,
        start_time=_ms(run.started_s()),
        tags=run_tags(run),
        run_name=f"{run.label()} {record.short_id}",
    )
    mlflow_id = created.info.run_id
    try:
        _log_values(client, mlflow_id, run)
        with tempfile.TemporaryDirectory(prefix="trainscale-mlflow-") as temp:
            client.log_artifacts(mlflow_id, str(_artifacts(run, Path(temp))), ARTIFACT_DIR)
        if record.status != "running":
            finished = run.finished_s()
            client.set_terminated(
                mlflow_id, _STATUS[record.status], _ms(finished) if finished else None
            )
        client.set_tag(mlflow_id, EXPORTED_TAG, "true")
    except BaseException:
        # Leave no half-logged run behind; the next export makes it whole.
        with contextlib.suppress(Exception):
            client.delete_run(mlflow_id)
        raise
    return run.exported("replaced" if earlier else "created", f"MLflow run {mlflow_id}")


def run_tags(run: StoredRun) -> dict[str, str]:
    """The MLflow tags of a stored run: what it is and where it ran."""
    record = run.record
    values = {
        RUN_ID_TAG: record.run_id,
        "trainscale.status": record.status,
        "trainscale.workload": record.workload,
        "trainscale.framework": record.framework,
        "trainscale.data": record.data_kind,
        "trainscale.host": record.machine.hostname or record.owner_host,
        "trainscale.tag": record.tag,
        "trainscale.sweep_id": record.sweep_id,
        "trainscale.config_hash": record.config_hash,
        "trainscale.failure_reason": record.error,
    }
    from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

    return {k: _cut(str(v), MAX_TAG_VAL_LENGTH) for k, v in values.items() if v is not None}


def run_params(run: StoredRun) -> dict[str, str]:
    """The MLflow params of a stored run: its resolved config, values as text, a value
    longer than MLflow takes cut with a marker (the whole config is in run.json)."""
    from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

    return {
        name: _cut(value_text(value), MAX_PARAM_VAL_LENGTH)
        for name, value in run.config_values().items()
    }


def _log_values(client: Any, mlflow_id: str, run: StoredRun) -> None:
    from mlflow.entities import Metric, Param
    from mlflow.utils.validation import MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH

    # MLflow wants a time for every value; a stored step has none of its own, so all share
    # the run's start (plot them against the step, as the docs say).
    at = _ms(run.started_s())
    params = [Param(name, value) for name, value in run_params(run).items()]
    series = {STEP_TIME: run.step_series(), **run.epoch_series()}
    metrics = [
        Metric(key, value, at, step) for key, points in series.items() for step, value in points
    ]
    metrics += [Metric(key, value, at, 0) for key, value in run.summary_figures().items()]
    for start in range(0, len(params), MAX_PARAMS_TAGS_PER_BATCH):
        client.log_batch(mlflow_id, params=params[start : start + MAX_PARAMS_TAGS_PER_BATCH])
    for start in range(0, len(metrics), MAX_METRICS_PER_BATCH):
        client.log_batch(mlflow_id, metrics=metrics[start : start + MAX_METRICS_PER_BATCH])


def _artifacts(run: StoredRun, directory: Path) -> Path:
    """Write the run's JSON export and (completed runs) its report into `directory`."""
    with (directory / "run.json").open("w", encoding="utf-8") as out:
        run.json_export(out)
    if run.record.status == "completed":
        report = directory / "report"
        report.mkdir()
        data = aggregate(
            [run.record], title=f"run {run.record.short_id}", source=f"run {run.record.run_id}"
        )
        plots, skipped = render_plots(data)
        now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        for plot in plots:
            (report / plot.file_name).write_bytes(plot.png)
        (report / "report.md").write_text(
            render_markdown(data, plots, skipped, now), encoding="utf-8"
        )
        (report / "report.html").write_text(render_html(data, plots, skipped, now), "utf-8")
    return directory


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(TRUNCATED)] + TRUNCATED


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


@contextlib.contextmanager
def _quiet_mlflow() -> Iterator[None]:
    """MLflow's INFO lines (creating a store's tables) would bury the progress lines."""
    import mlflow  # noqa: F401  (importing it sets its loggers' levels: set ours after)

    loggers = [logging.getLogger(name) for name in ("mlflow", "alembic")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
