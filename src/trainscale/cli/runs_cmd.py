"""`trainscale runs`: list, show and export the runs in a results store, and list its sweeps."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from trainscale.cli.common import add_store_argument
from trainscale.errors import StoreError
from trainscale.results.export import EXPORT_FORMATS, SUMMARY_KEYS, export_runs
from trainscale.results.owner import is_here
from trainscale.results.schema import EPOCH_FIELDS, RUN_STATUSES
from trainscale.results.store import (
    RunRecord,
    RunStore,
    default_store_path,
)

_STATUS_STYLES = {"completed": "green", "running": "yellow", "failed": "red"}
_LIST_COLUMNS = (
    ("run", "left"),
    ("created (UTC)", "left"),
    ("workload", "left"),
    ("status", "left"),
    ("data", "left"),
    ("workers x threads", "right"),
    ("precision", "left"),
    ("samples/s", "right"),
    ("test acc", "right"),
    ("to target (s)", "right"),
)
_SWEEP_COLUMNS = (
    ("sweep", "left"),
    ("created (UTC)", "left"),
    ("name", "left"),
    ("source", "left"),
    ("runs done/planned", "right"),
)
# Wide enough that piped tables never wrap; rich only pads a table to its own width.
_PLAIN_WIDTH = 240


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `trainscale runs` and its actions `list`, `show`, `export` and `sweeps`."""
    parser = subparsers.add_parser(
        "runs",
        help="list, show and export stored runs; list stored sweeps",
        description=(
            "Read the results store: list runs, show one run, export runs as CSV/JSON, list "
            "the stored sweeps."
        ),
    )
    actions = parser.add_subparsers(dest="runs_action", metavar="ACTION", required=True)

    store = argparse.ArgumentParser(add_help=False)
    add_store_argument(store)
    filters = argparse.ArgumentParser(add_help=False)
    filters.add_argument("--workload", metavar="W", help="only runs of this workload")
    filters.add_argument("--status", choices=RUN_STATUSES, help="only runs with this status")
    filters.add_argument("--tag", metavar="T", help="only runs with this tag")
    filters.add_argument(
        "--limit", type=_positive_int, metavar="N", help="at most N runs (the newest)"
    )

    list_parser = actions.add_parser(
        "list", parents=[filters, store], help="a table of stored runs, newest first"
    )
    list_parser.set_defaults(runs_handler=_list)

    show_parser = actions.add_parser(
        "show", parents=[store], help="config, environment, summary and epochs of one run"
    )
    show_parser.add_argument("run_id", metavar="RUN_ID", help="run id, or a unique prefix of it")
    show_parser.set_defaults(runs_handler=_show)

    export_parser = actions.add_parser(
        "export", parents=[filters, store], help="write runs as CSV or JSON"
    )
    export_parser.add_argument(
        "--format", dest="fmt", required=True, choices=EXPORT_FORMATS, help="output format"
    )
    export_parser.add_argument(
        "--out", type=Path, metavar="FILE", help="write to FILE instead of standard output"
    )
    export_parser.set_defaults(runs_handler=_export)

    sweeps_parser = actions.add_parser(
        "sweeps",
        parents=[store],
        help="a table of stored sweeps, newest first",
        description=(
            "The stored sweeps, newest first: id, creation time, name, source (a file or "
            "recipe:NAME) and how many of the planned runs have completed. A sweep id (or a "
            "unique prefix) goes to `trainscale report --sweep`, `trainscale compare` and "
            "`trainscale simulate --validate --sweep`."
        ),
    )
    sweeps_parser.add_argument(
        "--limit", type=_positive_int, metavar="N", help="at most N sweeps (the newest)"
    )
    sweeps_parser.set_defaults(runs_handler=_sweeps)

    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the chosen `runs` action; returns the exit status."""
    return int(args.runs_handler(args))


# -- actions --------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        records = store.list_runs(args.workload, args.status, args.tag, args.limit)
        path = store.path
    console = _console()
    if not records:
        filtered = any(v is not None for v in (args.workload, args.status, args.tag))
        _emit(console, f"no runs in {path}" + (" match the filters" if filtered else ""))
        return 0
    rows = [
        [
            record.short_id,
            _short_time(record.created_at),
            _text(record.workload),
            Text(_status_text(record), style=_STATUS_STYLES.get(record.status, "")),
            _text(record.data_kind),
            f"{_text(record.world_size)} x {_text(record.threads_per_worker)}",
            _text(record.precision),
            _number(record.summary.get("samples_per_s"), ".1f"),
            _accuracy_cell(record),
            _time_to_target_cell(record),
        ]
        for record in records
    ]
    table = _table(console)
    for header, justify in _LIST_COLUMNS:
        table.add_column(header, justify=justify, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    _emit_unsquashed(console, table)
    return 0


def _show(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        record = store.get_run(args.run_id)
        epochs = store.epochs(record.run_id)
    console = _console()
    title = Text(f"run {record.run_id} ")
    title.append(_status_text(record), style=_STATUS_STYLES.get(record.status, ""))
    _emit(console, title)

    overview = {
        "created": record.created_at,
        "finished": record.finished_at,
        "workload": record.workload,
        "data": record.data_kind,
        "workers": record.world_size,
        "threads per worker": record.threads_per_worker,
        "affinity": record.affinity,
        "precision": record.precision,
        "global batch size": record.global_batch_size,
        "tag": record.tag,
        "owner": record.owner.describe() if record.owner else None,
        "schema version": record.schema_version,
    }
    _emit(console, _key_value_table(console, overview))
    if record.error:
        _emit(console, _section("error"))
        _emit(console, Text(record.error, style="red"))
    if record.data_kind == "synthetic":
        _emit(console, Text("synthetic data: accuracy and loss figures measure nothing"))

    if record.summary:
        _emit(console, _section("summary"))
        # The headline metrics first, in their usual order, then whatever else was recorded.
        known = {key: record.summary[key] for key in SUMMARY_KEYS if key in record.summary}
        _emit(console, _key_value_table(console, {**known, **record.summary}))
    if epochs:
        _emit(console, _section("epochs"))
        _emit_unsquashed(console, _epoch_table(console, epochs))
    for name, values in (("config", record.config), ("environment", record.env)):
        _emit(console, _section(name))
        _emit(console, _key_value_table(console, _flatten(values)) if values else "(not recorded)")
    return 0


def _export(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        records = store.list_runs(args.workload, args.status, args.tag, args.limit)
        if args.out is None:
            export_runs(records, args.fmt, sys.stdout, epochs_of=store.epochs)
            return 0
        _write_atomically(
            args.out, lambda out: export_runs(records, args.fmt, out, epochs_of=store.epochs)
        )
    noun = "run" if len(records) == 1 else "runs"
    print(f"wrote {len(records)} {noun} to {args.out}")
    return 0


def _sweeps(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        sweeps = store.list_sweeps(args.limit)
        done = store.sweep_progress()
        path = store.path
    console = _console()
    if not sweeps:
        _emit(console, f"no sweeps in {path}")
        return 0
    table = _table(console)
    for header, justify in _SWEEP_COLUMNS:
        table.add_column(header, justify=justify, no_wrap=True)
    for sweep in sweeps:
        table.add_row(
            sweep.short_id,
            _short_time(sweep.created_at),
            # One line each, whatever a multi-line TOML string put there.
            " ".join(sweep.name.split()),
            " ".join(sweep.source.split()),
            f"{done.get(sweep.sweep_id, 0)}/{len(sweep.plan)}",
        )
    _emit_unsquashed(console, table)
    return 0


# -- helpers --------------------------------------------------------------------------------


def _open_store(args: argparse.Namespace) -> RunStore:
    # Reading never creates a store: a mistyped path should say so, not show an empty list.
    path = args.store if args.store is not None else default_store_path()
    return RunStore(path, create=False, fail_stale=True)


def _write_atomically(path: Path, write: Callable[[TextIO], None]) -> None:
    """Write a file through a temporary sibling and a rename, so readers never see half."""
    parent = path.parent
    if not parent.is_dir():
        raise StoreError(f"cannot write {path}: directory {parent} does not exist")
    temp = parent / f".{path.name}.{os.getpid()}.tmp"
    created = False
    try:
        # os.open rather than tempfile: the mode then follows the umask like any new file.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        created = True
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            write(out)
        os.replace(temp, path)
    except OSError as error:
        raise StoreError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        if created and temp.exists():
            temp.unlink()


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _console() -> Console:
    # markup off: tags, errors and config values may contain [brackets] that are not markup.
    if sys.stdout.isatty():
        return Console(markup=False, highlight=False)
    return Console(
        file=sys.stdout,
        width=_PLAIN_WIDTH,
        color_system=None,
        markup=False,
        highlight=False,
        emoji=False,
    )


def _emit(console: Console, renderable: Any) -> None:
    """Print to the terminal, or (piped) as plain lines without rich's trailing cell padding."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as capture:
        console.print(renderable)
    lines = capture.get().splitlines()
    sys.stdout.write("".join(line.rstrip() + "\n" for line in lines))


def _emit_unsquashed(console: Console, table: Table) -> None:
    """Print a table of numbers and ids at its natural width, even past the terminal's."""
    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    if natural > console.width:
        # Rich would squash or drop columns to fit, and a cut run id cannot be pasted into
        # `runs show`: a terminal that wraps long lines loses nothing.
        console.width = natural
    _emit(console, table)


def _table(console: Console) -> Table:
    if console.is_terminal:
        return Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    # Piped: no box characters, just aligned columns under a header.
    return Table(box=None, pad_edge=False, show_edge=False)


def _section(name: str) -> Text:
    return Text(f"\n{name}", style="bold")


def _key_value_table(console: Console, values: dict[str, Any]) -> Table:
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("key", style="dim" if console.is_terminal else "", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in values.items():
        table.add_row(str(key), _value(key, value))
    return table


def _epoch_table(console: Console, epochs: list[dict[str, Any]]) -> Table:
    table = _table(console)
    table.add_column("epoch", justify="right", no_wrap=True)
    for field in EPOCH_FIELDS:
        table.add_column(field, justify="right", no_wrap=True)
    for row in epochs:
        table.add_row(
            str(row["epoch"]),
            *(_number(row.get(field), ".4f") for field in EPOCH_FIELDS),
        )
    return table


def _flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys, so that config and environment read as key/value lines."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _value(key: str, value: Any) -> str:
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


def _number(value: Any, spec: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return format(value, spec)


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def _short_time(iso: str) -> str:
    # "2025-01-02T12:34:56.789+00:00" -> "2025-01-02 12:34"; the column header says UTC.
    return iso[:16].replace("T", " ")


def _status_text(record: RunRecord) -> str:
    """The status; for a run still running on another machine, which one (this one could
    not tell whether it is still alive: stale runs are only found on their own host)."""
    owner = record.owner
    if record.status == "running" and owner is not None and not is_here(owner):
        return f"running on {owner.host}"
    return record.status


def _accuracy_cell(record: RunRecord) -> str:
    # No accuracy claim from synthetic data (see the measurement rules).
    if record.data_kind == "synthetic":
        return "-"
    return _number(record.summary.get("test_accuracy"), ".4f")


def _time_to_target_cell(record: RunRecord) -> str:
    if record.data_kind == "synthetic" or record.status != "completed":
        return "-"
    seconds = record.summary.get("time_to_target_s")
    if seconds is None:
        # "missed" only where the run was evaluated: a --no-eval run never looked.
        evaluated = record.summary.get("test_accuracy") is not None
        return "missed" if evaluated and record.summary.get("target_accuracy") is not None else "-"
    return _number(seconds, ".1f")
