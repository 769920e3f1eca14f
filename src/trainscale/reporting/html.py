"""The report as one self-contained HTML page: inline CSS, plots as data URIs, no script.

The page makes no request of its own: its Content-Security-Policy allows images only from
`data:` URIs and styles only inline, so it opens the same from a mail attachment, an
air-gapped machine or a CI artefact, and anything that tried to load from elsewhere would be
blocked (and show as an error in the browser console).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape

from trainscale.metrics.scaling import NOISY_RELATIVE_IQR
from trainscale.reporting import tables
from trainscale.reporting.frameworks import COLUMNS as FRAMEWORK_COLUMNS
from trainscale.reporting.frameworks import framework_rows, several_frameworks
from trainscale.reporting.markdown import AMDAHL_MODEL
from trainscale.reporting.model import ReportData
from trainscale.reporting.platforms import (
    PLATFORM_COLUMNS,
    platform_configurations,
    platform_note,
    platform_rows,
    platform_table_applies,
)
from trainscale.reporting.plots import PLOT_TITLES, Plot, SkippedPlot

CONTENT_SECURITY_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232b;
       max-width: 1200px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccd; }
h3 { font-size: 1.05em; margin: 1.4em 0 .4em; }
table { border-collapse: collapse; margin: .6em 0; font-size: 13px; }
th, td { border: 1px solid #d6dae0; padding: 4px 7px; vertical-align: top; }
th { background: #eef1f5; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.baseline td { background: #f3f8ee; } tr.noisy td:first-child { border-left: 4px solid #d33; }
.note { background: #fff7e0; border-left: 4px solid #e0a800; padding: .5em .8em; margin: .6em 0; }
.meta { color: #4a5360; margin: 0; } .skipped { color: #5d6673; }
figure { margin: 1em 0; } img { max-width: 100%; height: auto; border: 1px solid #e3e6ea; }
figcaption { color: #4a5360; font-size: 13px; }
code { font: 0.92em ui-monospace, "SFMono-Regular", Menlo, monospace; background: #eef1f5;
       padding: 0 .25em; border-radius: 3px; }
.scroll { overflow-x: auto; } td:last-child { min-width: 16em; }
"""
_NUMERIC = {
    "runs",
    "samples/s (median)",
    "samples/s IQR",
    "step ms (median, IQR)",
    "speedup",
    "efficiency / worker",
    "efficiency / core",
    "time to target (s)",
    "cost ($)",
    "cost to target ($)",
    "test accuracy",
    "peak MiB / worker",
    "processing time per step (ms)",
    "% gain vs slowest",
    "time per epoch (s)",
    "throughput speedup [95%]",
    "speedup to target [95%]",
}


_NUMERIC_TD = '<td class="num">'


def render_html(
    data: ReportData,
    plots: Sequence[Plot],
    skipped: Sequence[SkippedPlot],
    generated_at: str,
) -> str:
    """The whole report as one HTML document with every plot embedded."""
    body: list[str] = [f"<h1>trainscale report: {escape(data.title)}</h1>"]
    body.append(f'<p class="meta">Source: {escape(data.source)}</p>')
    body.append(f'<p class="meta">Generated: {escape(generated_at)} (UTC)</p>')
    for line in tables.machine_lines(data):
        body.append(f'<p class="meta">Machine: {escape(line)}</p>')
    for note in data.notes:
        body.append(f'<p class="note"><strong>Note.</strong> {text_html(note)}</p>')

    for section in data.workloads:
        body.append(f"<h2>{escape(section.workload)}</h2>")
        body.append(f"<p><strong>Baseline:</strong> {text_html(tables.baseline_text(section))}</p>")
        classes = [
            " ".join(name for name, on in (("baseline", c.is_baseline), ("noisy", c.noisy)) if on)
            for c in section.configurations
        ]
        rows = tables.configuration_rows(section)
        body.append(_table(tables.CORE_COLUMNS, rows, classes, core=True))
        if any(c.noisy for c in section.configurations):
            body.append(f'<p class="meta">Row marks: {escape(tables.ROW_MARKS)}.</p>')
        body.append(
            f"<p><strong>Amdahl's law</strong> ({escape(AMDAHL_MODEL)}): "
            f"{text_html(section.amdahl_note)}</p>"
        )
        body.append("<h3>Details</h3>")
        body.append(_table(tables.DETAIL_COLUMNS, rows, classes))
        if platform_table_applies(section):
            body.append("<h3>Time and accuracy per platform</h3>")
            on_platforms = platform_configurations(section)
            shown = [classes[section.configurations.index(c)] for c in on_platforms]
            body.append(_table(PLATFORM_COLUMNS, platform_rows(section), shown))
            body.append(f"<p>{text_html(platform_note(section))}</p>")
        if section.affinity_rows:
            body.append("<h3>Processing time by parallel setting</h3>")
            body.append(_table(tables.AFFINITY_COLUMNS, tables.affinity_rows(section)))
            body.append(f"<p>{text_html(section.affinity_note.capitalize())}.</p>")
        for plot in (p for p in plots if p.workload == section.workload):
            body.append(_figure(plot))
        missing = [s for s in skipped if s.workload == section.workload]
        if missing:
            items = "".join(
                f"<li>{escape(PLOT_TITLES[s.kind])}: {text_html(s.reason)}</li>" for s in missing
            )
            body.append(f'<div class="skipped">Plots not drawn:<ul>{items}</ul></div>')

    if several_frameworks(data):
        body.append("<h2>Frameworks side by side</h2>")
        body.append(_table(FRAMEWORK_COLUMNS, framework_rows(data)))
        body.append(
            "<p>Each framework's speedup and efficiency are over its own baseline; 'vs "
            "PyTorch' is its throughput over PyTorch's at the same setting.</p>"
        )
    rows = tables.not_completed_rows(data)
    if rows:
        body.append("<h2>Runs that did not complete</h2>")
        body.append(_table(tables.NOT_COMPLETED_COLUMNS, rows))
    body.append("<h2>How to read this report</h2><ul>")
    body += [
        f"<li><strong>{escape(term)}</strong>: {text_html(meaning)}</li>"
        for term, meaning in tables.EXPLANATIONS
    ]
    body.append(f"<li><strong>row marks</strong>: {escape(tables.ROW_MARKS)}</li>")
    body.append(
        f"<li><strong>Amdahl fit</strong>: {escape(AMDAHL_MODEL)}, where s is the serial "
        "fraction, fitted by least squares on 1/S over the baseline's series and clamped to "
        "[0, 1]</li>"
    )
    body.append(f"<li>noisy threshold: {NOISY_RELATIVE_IQR:.0%} of the median</li></ul>")

    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>trainscale report: {escape(data.title)}</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def text_html(text: str) -> str:
    """`text` escaped, its `code spans` (commands in notes) as <code>: no literal backticks."""
    parts = tables.CODE_SPAN.split(str(text))
    # split() alternates: text, code, text, code, ...
    return "".join(
        f"<code>{escape(part)}</code>" if index % 2 else escape(part)
        for index, part in enumerate(parts)
    )


def data_uri(png: bytes) -> str:
    """A PNG as a `data:` URI for an <img> src."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _figure(plot: Plot) -> str:
    return (
        f'<figure><img src="{data_uri(plot.png)}" alt="{escape(plot.alt)}">'
        f"<figcaption>{escape(plot.title)} (also {escape(plot.file_name)})</figcaption></figure>"
    )


def _table(
    columns: Sequence[str],
    rows: Sequence[Mapping[str, str]],
    row_classes: Sequence[str] | None = None,
    core: bool = False,
) -> str:
    head = "".join(f"<th>{escape(tables.heading(c, core))}</th>" for c in columns)
    lines = [f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>']
    for index, row in enumerate(rows):
        css = row_classes[index] if row_classes else ""
        cells = "".join(
            (_NUMERIC_TD if c in _NUMERIC else "<td>")
            + (text_html if c == "notes" else escape)(row.get(c, ""))
            + "</td>"
            for c in columns
        )
        lines.append(f'<tr class="{css}">{cells}</tr>' if css else f"<tr>{cells}</tr>")
    lines.append("</tbody></table></div>")
    return "\n".join(lines)
