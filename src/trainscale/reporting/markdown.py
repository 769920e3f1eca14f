"""The report as Markdown: the same tables as the HTML page, plots as links to the PNG files.

Tags, sweep names, configuration labels, workload names and error messages come from users
and from the store, so every such string goes through `md_text` before it lands in the file:
a label must not end a table cell, start a new row, open a code span, emphasis or a link, or
carry raw HTML (`<script>`) into a renderer that passes HTML through.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence

from trainscale.metrics.scaling import NOISY_RELATIVE_IQR
from trainscale.reporting import tables
from trainscale.reporting.frameworks import COLUMNS as FRAMEWORK_COLUMNS
from trainscale.reporting.frameworks import framework_rows, several_frameworks
from trainscale.reporting.model import ReportData
from trainscale.reporting.platforms import (
    PLATFORM_COLUMNS,
    platform_note,
    platform_rows,
    platform_table_applies,
)
from trainscale.reporting.plots import PLOT_TITLES, Plot, SkippedPlot

AMDAHL_MODEL = "S(n) = 1 / (s + (1 - s) / n)"


def render_markdown(
    data: ReportData,
    plots: Sequence[Plot],
    skipped: Sequence[SkippedPlot],
    generated_at: str,
) -> str:
    """The whole report as GitHub-flavoured Markdown (images are relative PNG links)."""
    out: list[str] = [f"# trainscale report: {md_text(data.title)}", ""]
    out += [f"- Source: {md_text(data.source)}", f"- Generated: {generated_at} (UTC)"]
    out += [f"- Machine: {md_text(line)}" for line in tables.machine_lines(data)]
    out.append("")
    for note in data.notes:
        out += [f"> **Note.** {md_text(note)}", ""]

    for section in data.workloads:
        out += [f"## {md_text(section.workload)}", ""]
        out += [f"**Baseline:** {md_text(tables.baseline_text(section))}", ""]
        rows = tables.configuration_rows(section)
        out += _table(tables.CORE_COLUMNS, rows, core=True)
        out += ["", f"**Amdahl's law** ({AMDAHL_MODEL}): {md_text(section.amdahl_note)}", ""]
        out += ["### Details", ""]
        out += _table(tables.DETAIL_COLUMNS, rows)
        out.append("")
        if platform_table_applies(section):
            out += ["### Time and accuracy per platform", ""]
            out += _table(PLATFORM_COLUMNS, platform_rows(section))
            out += ["", _paragraph(platform_note(section)), ""]
        if section.affinity_rows:
            out += ["### Processing time by parallel setting", ""]
            out += _table(tables.AFFINITY_COLUMNS, tables.affinity_rows(section))
            out += ["", _paragraph(section.affinity_note.capitalize() + "."), ""]
        for plot in (p for p in plots if p.workload == section.workload):
            out += [
                f"### {md_text(plot.title)}",
                "",
                f"![{md_text(plot.alt)}]({plot.file_name})",
                "",
            ]
        missing = [s for s in skipped if s.workload == section.workload]
        if missing:
            out.append("Plots not drawn:")
            out += [f"- {PLOT_TITLES[s.kind]}: {md_text(s.reason)}" for s in missing]
            out.append("")

    if several_frameworks(data):
        out += ["## Frameworks side by side", ""]
        out += _table(FRAMEWORK_COLUMNS, framework_rows(data))
        out += [
            "",
            _paragraph(
                "Each framework's speedup and efficiency are over its own baseline; 'vs "
                "PyTorch' is its throughput over PyTorch's at the same setting."
            ),
            "",
        ]
    rows = tables.not_completed_rows(data)
    if rows:
        out += ["## Runs that did not complete", ""]
        out += _table(tables.NOT_COMPLETED_COLUMNS, rows)
        out.append("")
    out += ["## How to read this report", ""]
    out += [f"- **{term}**: {meaning}" for term, meaning in tables.EXPLANATIONS]
    out.append(
        f"- **Amdahl fit**: {AMDAHL_MODEL}, where s is the serial fraction, fitted by least "
        "squares on 1/S over the baseline's series and clamped to [0, 1]"
    )
    out.append(f"- noisy threshold: {NOISY_RELATIVE_IQR:.0%} of the median")
    out.append("")
    return "\n".join(out)


# Characters that start inline markup in CommonMark and GitHub's tables: a backslash, code
# spans, emphasis, links and images, strikethrough, table cell ends.
_MARKUP = re.compile(r"([\\`*_\[\]|~])")
# What makes the start of a line a heading, a list item or a setext underline: the mark
# (group 2) is escaped, an ordered list's number (group 1) kept.
_BLOCK_START = re.compile(r"^(\d*)([#+=.)-])")


def md_text(text: object) -> str:
    """`text` as literal inline Markdown on one line: whitespace (newlines included) folded
    to single spaces, `&`, `<` and `>` as HTML entities (so no tag or entity of the user's
    is interpreted) and markup characters backslash-escaped. Renders as the original text,
    nothing more, inside a line or a table cell."""
    flat = " ".join(str(text).split())
    return _MARKUP.sub(r"\\\1", html.escape(flat, quote=False))


def _paragraph(text: object) -> str:
    """`md_text` for text that starts a line: a leading mark that would make the line a
    heading or a list item is escaped too."""
    return _BLOCK_START.sub(r"\1\\\2", md_text(text), count=1)


def _table(
    columns: Sequence[str], rows: Sequence[Mapping[str, str]], core: bool = False
) -> list[str]:
    headings = (tables.heading(c, core) for c in columns)
    lines = ["| " + " | ".join(map(md_text, headings)) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |")
    return lines


def _cell(text: str) -> str:
    # md_text escapes the pipe that would end the cell and folds the newline that would
    # end the row; an empty cell keeps a space so the row keeps its columns.
    return md_text(text) or " "
