"""Make a report from the store: load the runs, aggregate, draw, render, write atomically."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from trainscale.hardware.price_file import load_price_table
from trainscale.hardware.prices import PriceTable
from trainscale.reporting import ReportError
from trainscale.reporting.aggregate import aggregate
from trainscale.reporting.csv_table import render_csv
from trainscale.reporting.html import render_html
from trainscale.reporting.markdown import render_markdown
from trainscale.reporting.model import ReportData
from trainscale.reporting.plots import PLOT_TITLES, SkippedPlot, render_plots
from trainscale.results.outputs import replace_bytes
from trainscale.results.records import RunRecord
from trainscale.results.store import RunStore


@dataclass(frozen=True)
class WrittenReport:
    """What `build_report` wrote."""

    html: Path
    markdown: Path
    csv: Path
    plots: list[Path]
    skipped: list[SkippedPlot]
    data: ReportData


def write_report(
    store_path: str | os.PathLike[str],
    *,
    sweep_id: str | None = None,
    run_ids: Sequence[str] | None = None,
    out_dir: str | os.PathLike[str],
    baseline: str | None = None,
    prices: str | os.PathLike[str] | None = None,
) -> Path:
    """Write report.md, report.csv, report.html and the plot PNGs into `out_dir`.

    Give either a sweep id (or unique prefix) or run ids (or unique prefixes). Returns the
    path of report.html. Raises a TrainscaleError subclass (one line for the user) for an
    unknown or ambiguous id, a report with no completed run, an unknown baseline, or a
    directory that cannot be written. `prices` is a price file (default: $TRAINSCALE_PRICES,
    else the packaged example prices).
    """
    return build_report(
        store_path,
        sweep_id=sweep_id,
        run_ids=run_ids,
        out_dir=out_dir,
        baseline=baseline,
        prices=prices,
    ).html


def build_report(
    store_path: str | os.PathLike[str],
    *,
    sweep_id: str | None = None,
    run_ids: Sequence[str] | None = None,
    tag: str | None = None,
    out_dir: str | os.PathLike[str],
    baseline: str | None = None,
    prices: str | os.PathLike[str] | None = None,
) -> WrittenReport:
    """`write_report`, returning everything written (for the CLI's summary line); `tag`
    reports the runs stored with that tag instead (a bench's `bench:ID`, an emulation's
    `emulate:ID`, a search's `recommend:ID`)."""
    data = load_report_data(
        store_path,
        sweep_id=sweep_id,
        run_ids=run_ids,
        tag=tag,
        baseline=baseline,
        prices=load_price_table(prices),
    )
    out = prepare_out_dir(Path(out_dir))
    plots, skipped = render_plots(data)
    generated_at = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    # The plots first and the HTML page last: each file appears whole (temp + rename), and
    # the page a reader opens appears only when everything it describes is in place.
    plot_paths = [_write_atomically(out / plot.file_name, plot.png) for plot in plots]
    markdown = _write_atomically(
        out / "report.md", render_markdown(data, plots, skipped, generated_at).encode("utf-8")
    )
    csv_path = _write_atomically(out / "report.csv", render_csv(data).encode("utf-8"))
    html = _write_atomically(
        out / "report.html", render_html(data, plots, skipped, generated_at).encode("utf-8")
    )
    _remove_stale_plots(out, {path.name for path in plot_paths})
    return WrittenReport(html, markdown, csv_path, plot_paths, skipped, data)


def _remove_stale_plots(out: Path, written: set[str]) -> None:
    """Remove the plots an earlier report left in `out` that this one did not draw (an
    accuracy plot beside a report of synthetic data that says it makes no accuracy claim)."""
    for path in out.glob("*.png"):
        ours = any(path.name.startswith(f"{kind}-") for kind in PLOT_TITLES)
        if ours and path.name not in written and path.is_file():
            path.unlink(missing_ok=True)


def load_report_data(
    store_path: str | os.PathLike[str],
    *,
    sweep_id: str | None = None,
    run_ids: Sequence[str] | None = None,
    tag: str | None = None,
    baseline: str | None = None,
    prices: PriceTable | None = None,
) -> ReportData:
    """The report's figures for a sweep, for named runs or for the runs of a tag, read from
    the store.

    `prices` costs each configuration (None: no cost columns).
    """
    if sum(given is not None for given in (sweep_id, run_ids, tag)) != 1:
        raise ReportError("report needs a sweep id, run ids or a tag (exactly one of them)")
    with RunStore(store_path, create=False, fail_stale=True) as store:
        if tag is not None:
            if not tag.strip():
                raise ReportError("empty tag; `trainscale runs list` shows each run's tag")
            tagged = list(reversed(store.list_runs(tag=tag)))  # in the order they ran
            if not tagged:
                raise ReportError(
                    f"no runs with tag {tag!r} in {store.path}; `trainscale runs list` shows "
                    "each run's tag"
                )
            return aggregate(
                tagged,
                title=f"runs tagged {tag}",
                source=f"tag {tag} ({len(tagged)} run(s))",
                baseline=baseline,
                prices=prices,
            )
        if sweep_id is not None:
            sweep = store.get_sweep(sweep_id)
            runs = store.sweep_runs(sweep.sweep_id)
            if not runs:
                raise ReportError(
                    f"sweep {sweep.short_id} ({sweep.name}) has no runs yet; run it with "
                    "`trainscale sweep` (or --resume) first"
                )
            labels = {p["config_hash"]: p["label"] for p in sweep.plan if "config_hash" in p}
            return aggregate(
                runs,
                title=sweep.name,
                source=f"sweep {sweep.name} ({sweep.short_id}, from {sweep.source})",
                labels=labels,
                baseline=baseline,
                sweep_id=sweep.sweep_id,
                prices=prices,
            )
        ids = [i for i in (run_ids or []) if i.strip()]
        if not ids:
            raise ReportError("no run ids given; `trainscale runs list` shows the stored runs")
        records: dict[str, RunRecord] = {}
        for run_id in ids:
            record = store.get_run(run_id)  # StoreError: unknown or ambiguous, one line
            records.setdefault(record.run_id, record)
    shown = ", ".join(r[:8] for r in list(records)[:5])
    more = f" and {len(records) - 5} more" if len(records) > 5 else ""
    return aggregate(
        list(records.values()),
        title=f"{len(records)} run(s)",
        source=f"runs {shown}{more}",
        baseline=baseline,
        prices=prices,
    )


def prepare_out_dir(path: Path) -> Path:
    """Create the report directory if needed; ReportError if it cannot be written."""
    if path.exists() and not path.is_dir():
        raise ReportError(f"cannot write the report to {path}: it is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ReportError(
            f"cannot create report directory {path}: {error.strerror or error}"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ReportError(f"cannot write the report to {path}: the directory is not writable")
    return path


def _write_atomically(path: Path, content: bytes) -> Path:
    """Write through a temporary sibling and a rename, so no reader sees a half-written file."""
    try:
        replace_bytes(path, content)
    except OSError as error:
        raise ReportError(f"cannot write {path}: {error.strerror or error}") from None
    return path
