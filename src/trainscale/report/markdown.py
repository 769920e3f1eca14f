"""The report as Markdown: the same tables as the HTML page, plots as links to the PNG files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainscale.metrics.scaling import NOISY_RELATIVE_IQR
from trainscale.report import tables
from trainscale.report.model import ReportData
from trainscale.report.plots import PLOT_TITLES, Plot, SkippedPlot

AMDAHL_MODEL = "S(n) = 1 / (s + (1 - s) / n)"


def render_markdown(
    data: ReportData,
    plots: Sequence[Plot],
    skipped: Sequence[SkippedPlot],
    generated_at: str,
) -> str:
    """The whole report as GitHub-flavoured Markdown (images are relative PNG links)."""
    out: list[str] = [f"# trainscale report: {_inline(data.title)}", ""]
    out += [f"- Source: {_inline(data.source)}", f"- Generated: {generated_at} (UTC)"]
    out += [f"- Machine: {_inline(line)}" for line in tables.machine_lines(data)]
    out.append("")
    for note in data.notes:
        out += [f"> **Note.** {_inline(note)}", ""]

    for section in data.workloads:
        out += [f"## {_inline(section.workload)}", ""]
        out += [f"**Baseline:** {_inline(tables.baseline_text(section))}", ""]
        out += _table(tables.CONFIGURATION_COLUMNS, tables.configuration_rows(section))
        out += ["", f"**Amdahl's law** ({AMDAHL_MODEL}): {_inline(section.amdahl_note)}", ""]
        if section.affinity_rows:
            out += ["### Processing time by parallel setting", ""]
            out += _table(tables.AFFINITY_COLUMNS, tables.affinity_rows(section))
            out += ["", _inline(section.affinity_note.capitalize() + "."), ""]
        for plot in (p for p in plots if p.workload == section.workload):
            out += [
                f"### {_inline(plot.title)}",
                "",
                f"![{_inline(plot.alt)}]({plot.file_name})",
                "",
            ]
        missing = [s for s in skipped if s.workload == section.workload]
        if missing:
            out.append("Plots not drawn:")
            out += [f"- {PLOT_TITLES[s.kind]}: {_inline(s.reason)}" for s in missing]
            out.append("")

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


def _table(columns: Sequence[str], rows: Sequence[Mapping[str, str]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |")
    return lines


def _cell(text: str) -> str:
    # A pipe would end the cell and a newline the row.
    return _inline(text).replace("|", "\\|") or " "


def _inline(text: str) -> str:
    return " ".join(str(text).split())
