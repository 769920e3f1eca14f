"""Stored runs as TensorBoard event files (docs/tracking.md), written by PyTorch's
`SummaryWriter` (`pip install 'trainscale[tensorboard]'`, which also installs the viewer).

Each run gets a directory of its own under the log directory, named so a person recognises
it (`mnist-cnn_2x1_b64_fp32_1a2b3c4d`), holding one event file with the scalars
`step_time_s` (step = stored step index), `epoch/<field>` (step = epoch) and `summary/<name>`
(step 0), the run's description and config as text, and the config as hparams (the HParams
tab, its metrics being the `summary/` scalars). Every event carries the run's start as its
wall time: read the curves against the step.

A run's hparams are its session's start and end (with its status: success, failure, or no
end while it runs), never an experiment summary of its own: TensorBoard takes one such
summary for a whole log directory, so one run's settings and metrics would be the columns
of all; without one it gathers them over every run.

Writing a run again replaces its directory whole (written beside it, then swapped in), so a
run never holds two event files that repeat each other; a directory the run had under
another name (a script run's batch is 0 while it runs) goes too.
"""

from __future__ import annotations

import os
import shutil
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainscale.errors import ConfigError
from trainscale.reporting.tracking import (
    STEP_TIME,
    ExportedRun,
    OnRun,
    StoredRun,
    dir_name,
    require_extra,
    value_text,
)
from trainscale.results.outputs import check_out_dir

SUMMARY_PREFIX = "summary/"


def write_tensorboard(
    runs: Sequence[StoredRun], logdir: str | os.PathLike[str], *, on_run: OnRun | None = None
) -> list[ExportedRun]:
    """Write each of `runs` (from `tracking.load_runs`) into its own directory under
    `logdir` (created if missing); returns what was done with each, telling `on_run` as it
    goes. ConfigError (one line) when the extra is missing or `logdir` cannot be written,
    before anything is."""
    require_extra("tensorboard")
    if not str(logdir).strip():  # Path("") is the working directory: never meant
        raise ConfigError("the TensorBoard log directory is empty; give a directory")
    root = Path(logdir)
    check_out_dir(root, "the TensorBoard logs")
    writer_class = _summary_writer()
    root.mkdir(parents=True, exist_ok=True)
    done = []
    for run in runs:
        exported = _write_run(writer_class, root, run)
        done.append(exported)
        if on_run is not None:
            on_run(exported)
    return done


def _set_status(end: Any, status: str) -> None:
    """Give a session-end summary the run's status (torch's `hparams` always says success)."""
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    value = end.value[0]
    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    code = "STATUS_SUCCESS" if status == "completed" else "STATUS_FAILURE"
    data.session_end_info.status = api_pb2.Status.Value(code)
    value.metadata.plugin_data.content = data.SerializeToString()


def _write_run(writer_class: Any, root: Path, run: StoredRun) -> ExportedRun:
    from torch.utils.tensorboard.summary import hparams

    final = root / dir_name(run)
    temp = root / f".{final.name}.{os.getpid()}.tmp"
    shutil.rmtree(temp, ignore_errors=True)
    at = run.started_s()
    writer = writer_class(log_dir=str(temp))
    try:
        for step, value in run.step_series():
            writer.add_scalar(STEP_TIME, value, step, walltime=at)
        for tag, points in run.epoch_series().items():
            for epoch, value in points:
                writer.add_scalar(tag, value, epoch, walltime=at)
        figures = run.summary_figures()
        for name, value in figures.items():
            writer.add_scalar(SUMMARY_PREFIX + name, value, 0, walltime=at)
        writer.add_text("run", _description(run), 0, walltime=at)
        config = run.config_values()
        writer.add_text("config", _table(config), 0, walltime=at)
        hparam_values = {k: _hparam(v) for k, v in config.items() if v is not None}
        metrics = {SUMMARY_PREFIX + name: value for name, value in figures.items()}
        _experiment, start, end = hparams(hparam_values, metrics)
        writer.file_writer.add_summary(start, walltime=at)
        if run.record.status != "running":  # a running session has no end yet
            _set_status(end, run.record.status)
            writer.file_writer.add_summary(end, walltime=at)
    finally:
        writer.close()
    # The same run under another name: gone, as a directory written again is.
    stale = [
        other
        for other in root.glob(f"*_{run.record.short_id}")
        if other.is_dir() and other.name != final.name and not other.name.startswith(".")
    ]
    for other in stale:
        shutil.rmtree(other, ignore_errors=True)
    replaced = final.exists() or bool(stale)
    if final.exists():
        old = root / f".{final.name}.{os.getpid()}.old"
        os.replace(final, old)
        os.replace(temp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(temp, final)
    return run.exported("replaced" if replaced else "created", str(final))


def _summary_writer() -> Any:
    """torch's SummaryWriter, with TensorBoard told not to import TensorFlow.

    TensorBoard imports TensorFlow when it is installed (our tensorflow extra) merely to
    write files: seconds of import and a screenful of its log lines. A `notf` module is how
    TensorBoard's own builds select its TensorFlow-free file layer; local files need nothing
    more. (A process that has already used TensorBoard with TensorFlow keeps it.)"""
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter


def _hparam(value: Any) -> bool | int | float | str:
    if isinstance(value, (bool, int, float, str)):
        return value
    return value_text(value)


def _description(run: StoredRun) -> str:
    record = run.record
    lines = [
        f"trainscale run `{record.run_id}`: {run.label()}",
        f"status: {record.status}",
        f"created: {record.created_at}",
    ]
    if record.error:
        lines.append(f"failure reason: {record.error}")
    if run.synthetic:
        lines.append("synthetic data: no loss or accuracy figures")
    return "\n\n".join(lines)


def _table(values: dict[str, Any]) -> str:
    """Markdown table of the config; TensorBoard's text tab renders Markdown."""
    # A '|' inside a value would end its cell.
    cells = {name: value_text(value).replace("|", "\\|") for name, value in values.items()}
    rows = [f"| {name} | {text} |" for name, text in cells.items()]
    return "\n".join(["| setting | value |", "|---|---|", *rows])
