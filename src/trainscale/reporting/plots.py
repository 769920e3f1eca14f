"""The report's plots as PNG bytes, drawn from a ReportData only.

Each plot is its own `matplotlib.figure.Figure` on an Agg canvas: pyplot is never imported,
so no figure, style or rcParams state is shared between plots (or with a caller that uses
pyplot itself), and nothing needs a display. A plot without data is not drawn; it is
returned as skipped, with the reason, so the page can say so.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainscale.metrics import stats
from trainscale.reporting.model import Configuration, ReportData, WorkloadSection

PLOT_TITLES = {
    "throughput": "Throughput vs cores",
    "speedup": "Speedup vs cores",
    "efficiency": "Parallel efficiency vs cores",
    "accuracy": "Test accuracy vs training time",
    "time-to-accuracy": "Time to target accuracy",
    "final-accuracy": "Final test accuracy",
    "breakdown": "Step-time breakdown",
}
"""Every kind of plot, in page order, with its title."""

_DPI = 100
_WIDTH_IN = 7.0
IDEAL_LABEL = "ideal (linear in cores)"
"""The ideal line's legend entry; drawn only on plots whose x axis counts cores."""
_IDEAL_STYLE = {"color": "0.45", "linestyle": "--", "linewidth": 1.2}
_NOISY_STYLE = {"marker": "o", "markersize": 13, "markerfacecolor": "none", "color": "tab:red"}
_BUSY_STYLE = {"marker": "x", "markersize": 11, "markeredgewidth": 2, "color": "tab:gray"}


@dataclass(frozen=True)
class Plot:
    """One drawn plot."""

    kind: str
    workload: str
    file_name: str
    """Where it is written in the report directory, e.g. 'speedup-mnist-cnn.png'."""
    title: str
    alt: str
    """A text alternative: what the plot shows, in one sentence."""
    png: bytes


@dataclass(frozen=True)
class SkippedPlot:
    """A plot that was not drawn, and why."""

    kind: str
    workload: str
    reason: str


def render_plots(data: ReportData) -> tuple[list[Plot], list[SkippedPlot]]:
    """Every plot of the report, workload by workload, and the ones skipped for want of data."""
    drawn: list[Plot] = []
    skipped: list[SkippedPlot] = []
    for section in data.workloads:
        for kind in _DRAWERS:
            outcome = draw_figure(kind, section)
            if isinstance(outcome, str):
                skipped.append(SkippedPlot(kind, section.workload, outcome))
                continue
            figure, alt = outcome
            drawn.append(
                Plot(
                    kind=kind,
                    workload=section.workload,
                    file_name=f"{kind}-{slug(section.workload)}.png",
                    title=f"{PLOT_TITLES[kind]}: {section.workload}",
                    alt=alt,
                    png=png_bytes(figure),
                )
            )
    return drawn, skipped


def draw_figure(kind: str, section: WorkloadSection):
    """(matplotlib Figure, alt text) of plot `kind` for `section`, or why it is not drawn."""
    return _DRAWERS[kind](section)


def slug(text: str) -> str:
    """A file-name-safe form of `text` (letters, digits, '-', '_', '.')."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)
    return safe.strip("-.") or "workload"


# -- the plots --------------------------------------------------------------------------------


def _throughput(section: WorkloadSection):
    lines = _core_lines(section, lambda c: c.samples_per_s_median)
    if isinstance(lines, str):
        return lines
    figure, axes = new_figure()
    base = section.baseline
    for name, configs in lines:
        xs = [c.cores for c in configs]
        ys = [_kept(c.samples_per_s_median) for c in configs]
        low = [y - stats.percentile(c.samples_per_s, 25) for y, c in zip(ys, configs, strict=True)]
        high = [stats.percentile(c.samples_per_s, 75) - y for y, c in zip(ys, configs, strict=True)]
        axes.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=name)
    _ring_noisy(axes, lines, lambda c: c.samples_per_s_median)
    _mark_busy(axes, lines, lambda c: c.samples_per_s_median)
    if base is not None and base.samples_per_s_median:
        xs = _core_range(section)
        axes.plot(
            xs,
            [base.samples_per_s_median * n / base.cores for n in xs],
            label=IDEAL_LABEL,
            **_IDEAL_STYLE,
        )
    _cores_axis(axes, section)
    axes.set_ylabel("global samples/s (median; bars: IQR across repeats)")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    return figure, (
        f"Median global samples per second against cores (workers x threads) for "
        f"{section.workload}."
    )


def _speedup(section: WorkloadSection):
    if section.baseline is None:
        return "no baseline with a throughput, so no speedup"
    lines = _core_lines(section, lambda c: c.speedup)
    if isinstance(lines, str):
        return lines
    base = section.baseline
    figure, axes = new_figure()
    for name, configs in lines:
        ys = [c.speedup for c in configs]
        axes.plot([c.cores for c in configs], ys, marker="o", label=name)
    _ring_noisy(axes, lines, lambda c: c.speedup)
    _mark_busy(axes, lines, lambda c: c.speedup)
    xs = _core_range(section)
    axes.plot(xs, [n / base.cores for n in xs], label=IDEAL_LABEL, **_IDEAL_STYLE)
    if section.amdahl is not None:
        # Fitted over the baseline's series, whose threads per worker are fixed: its worker
        # ratio is its core ratio.
        top = max(xs)
        dense = [base.cores + (top - base.cores) * i / 100 for i in range(101)]
        dense = [n for n in dense if n >= base.cores]
        axes.plot(
            dense,
            [section.amdahl.predict(n / base.cores) for n in dense],
            color="tab:purple",
            linewidth=1.5,
            label=f"Amdahl fit, serial fraction s = {section.amdahl.serial_fraction:.3f}",
        )
    _cores_axis(axes, section)
    axes.set_ylabel(f"speedup vs '{_short(base.label)}'")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    return figure, (
        f"Speedup against cores for {section.workload}, with the ideal line and Amdahl's law "
        "fitted to the baseline's series."
    )


def _efficiency(section: WorkloadSection):
    if section.baseline is None:
        return "no baseline with a throughput, so no efficiency"
    lines = _core_lines(section, lambda c: c.efficiency_per_core)
    if isinstance(lines, str):
        return lines
    figure, axes = new_figure()
    for name, configs in lines:
        ys = [100 * (c.efficiency_per_core or 0.0) for c in configs]
        axes.plot([c.cores for c in configs], ys, marker="o", label=name)
    _ring_noisy(axes, lines, lambda c: 100 * (c.efficiency_per_core or 0.0))
    _mark_busy(axes, lines, lambda c: 100 * (c.efficiency_per_core or 0.0))
    axes.axhline(100, label="ideal (100%)", **_IDEAL_STYLE)
    _cores_axis(axes, section)
    axes.set_ylabel("efficiency per core (%)")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    return figure, f"Speedup per core, in percent, against cores for {section.workload}."


def _accuracy(section: WorkloadSection):
    configs = [c for c in section.configurations if c.accuracy_curves]
    if not configs:
        return _no_accuracy_reason(section)
    figure, axes = new_figure()
    colors = _colors()
    for config in configs:
        color = next(colors)
        for index, curve in enumerate(config.accuracy_curves):
            axes.plot(
                [t for t, _ in curve],
                [a for _, a in curve],
                marker=".",
                color=color,
                alpha=0.9 if index == 0 else 0.45,
                label=_short(config.label) if index == 0 else None,
            )
    target = next((c.target_accuracy for c in configs if c.target_accuracy is not None), None)
    if target is not None:
        axes.axhline(target, label=f"target {target:g}", **_IDEAL_STYLE)
    axes.set_xlabel("training clock (s)")
    axes.set_ylabel("test accuracy")
    axes.legend(fontsize="small")
    return figure, (
        f"Test accuracy against training-clock seconds for each configuration of "
        f"{section.workload} (one line per repeat)."
    )


def _time_to_accuracy(section: WorkloadSection):
    evaluated = [c for c in section.configurations if c.num_evaluated]
    if not evaluated:
        return _no_accuracy_reason(section)
    # An emulation's clock is one process's: it reaches its target in steps (the table).
    configs = [c for c in evaluated if not c.emulated]
    if not configs:
        return "emulations reach their target in steps (the table), not in a time of N workers"
    if not any(c.time_to_target_s is not None for c in configs):
        target = next((c.target_accuracy for c in configs if c.target_accuracy), None)
        if target is None:  # script runs given no --target-accuracy
            return "no target accuracy was given (`trainscale run --target-accuracy`)"
        return f"no configuration reached the target accuracy ({target:g})"
    figure, axes = new_figure(height=_bar_height(len(configs)))
    labels = [_wrap(c.label) for c in configs]
    values = [c.time_to_target_s or 0.0 for c in configs]
    bars = axes.barh(labels, values, color="tab:blue")
    for bar, config in zip(bars, configs, strict=True):
        if config.time_to_target_s is None:
            text = "not reached"
        else:
            text = f"{config.time_to_target_s:.1f} s ({config.num_reached}/{config.num_evaluated})"
        axes.annotate(
            text,
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    axes.invert_yaxis()  # first configuration on top, as in the table
    axes.set_xlabel("training clock to target (s): median of the runs that reached it")
    axes.margins(x=0.25)
    return (
        figure,
        f"Training-clock seconds to the target accuracy per configuration of {section.workload}.",
    )


def _final_accuracy(section: WorkloadSection):
    configs = [c for c in section.configurations if c.num_evaluated and c.test_accuracy is not None]
    if not configs:
        return _no_accuracy_reason(section)
    figure, axes = new_figure(height=_bar_height(len(configs)))
    values = [100 * (c.test_accuracy or 0.0) for c in configs]
    bars = axes.barh([_wrap(c.label) for c in configs], values, color="tab:green")
    for bar, value, config in zip(bars, values, configs, strict=True):
        runs = config.num_evaluated
        axes.annotate(
            f"{value:.2f}% ({runs} run{'' if runs == 1 else 's'})",
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    target = next((c.target_accuracy for c in configs if c.target_accuracy is not None), None)
    if target is not None:
        axes.axvline(100 * target, label=f"target {100 * target:g}%", **_IDEAL_STYLE)
        figure.legend(fontsize="small", loc="outside upper center")
    axes.invert_yaxis()  # first configuration on top, as in the table
    # Room right of 100% for the labels of bars that reach it; no tick claims more than 100%.
    axes.set_xlim(0, 130)
    axes.set_xticks(range(0, 101, 20))
    axes.set_xlabel("final test accuracy (%): median over the evaluated runs")
    return figure, (
        f"Median final test accuracy per configuration of {section.workload}, with the "
        "target accuracy."
    )


PART_LABELS = {"exposed_comm": "exposed communication"}
"""A step part's name in the breakdown's legend, where its stored key is not words."""


def stacked_parts(breakdown: Mapping[str, float]) -> dict[str, float]:
    """A step's parts as they add up to it. The stored backward holds the exposed
    communication (`backward()` returns once the last all-reduce is done), so it is stacked
    as its compute alone, the communication beside it."""
    parts = dict(breakdown)
    exposed = parts.get("exposed_comm")
    if exposed and "backward" in parts:
        parts["backward"] = max(0.0, parts["backward"] - exposed)
    return parts


def _breakdown(section: WorkloadSection):
    configs = [c for c in section.configurations if c.breakdown_s]
    if not configs:
        return "no run recorded a step-time breakdown"
    stacks = [stacked_parts(c.breakdown_s or {}) for c in configs]
    parts = list(dict.fromkeys(p for stack in stacks for p in stack))
    figure, axes = new_figure(height=_bar_height(len(configs)))
    labels = [_wrap(c.label) for c in configs]
    left = [0.0] * len(configs)
    colors = _colors()
    for part in parts:
        widths = [1000 * stack.get(part, 0.0) for stack in stacks]
        label = PART_LABELS.get(part, part.replace("_", " "))
        if part == "backward" and "exposed_comm" in parts:
            label = "backward compute"
        axes.barh(labels, widths, left=left, label=label, color=next(colors))
        left = [a + b for a, b in zip(left, widths, strict=True)]
    axes.invert_yaxis()
    axes.set_xlabel("median time per step (ms)")
    # Above the axes: inside, the legend would hide the bars it explains.
    figure.legend(fontsize="small", ncols=min(len(parts), 5), loc="outside upper center")
    return (
        figure,
        f"Median time per step split into its parts for each configuration of {section.workload}.",
    )


_DRAWERS: dict[str, Callable[[WorkloadSection], object]] = {
    "throughput": _throughput,
    "speedup": _speedup,
    "efficiency": _efficiency,
    "accuracy": _accuracy,
    "time-to-accuracy": _time_to_accuracy,
    "final-accuracy": _final_accuracy,
    "breakdown": _breakdown,
}


# -- helpers ----------------------------------------------------------------------------------


def _core_lines(
    section: WorkloadSection, value: Callable[[Configuration], float | None]
) -> list[tuple[str, list[Configuration]]] | str:
    """The section's series with a value, against cores, or why such a plot would say
    nothing. Cores, not workers, are the resource: 1 process x 2 threads and 2 workers x 1
    thread both use 2 cores, so both sit at x = 2 and the ideal line means the same for
    both. Each line is named by its configurations' labels."""
    measured = [c for c in section.configurations if value(c) is not None]
    counts = sorted({c.cores for c in measured})
    if len(counts) < 2:
        only = f" ({counts[0]})" if counts else ""
        return f"only one core count{only} was measured, so nothing varies along the axis"
    lines = []
    for series in section.series:
        configs = [section.configuration(k) for k in series.keys]
        configs = sorted((c for c in configs if value(c) is not None), key=lambda c: c.cores)
        if configs:
            lines.append((series_legend(configs), configs))
    return lines


def _kept(value: float | None) -> float:
    """A value of a configuration that `_core_lines` kept: never None."""
    if value is None:
        raise ValueError("a configuration without the plotted value")
    return value


def series_legend(configs: Sequence[Configuration]) -> str:
    """A line's legend entry from its configurations' labels (the names the table uses):
    the one label, two joined, or the first and last of more."""
    if len(configs) == 1:
        return _short(configs[0].label, 70)
    # Each label cut on its own, so that the join keeps the end of each.
    labels = [_short(c.label, 33) for c in configs]
    if len(labels) > 2:
        labels = [labels[0], "...", labels[-1]]
    return " / ".join(labels)


def _core_range(section: WorkloadSection) -> list[int]:
    counts = sorted({c.cores for c in section.configurations})
    return list(range(counts[0], counts[-1] + 1))


def _cores_axis(axes, section: WorkloadSection) -> None:
    counts = sorted({c.cores for c in section.configurations})
    axes.set_xticks(counts)
    axes.set_xlabel("cores (workers x threads per worker)")
    axes.grid(True, alpha=0.3)


def _ring_noisy(
    axes,
    lines: Sequence[tuple[str, Sequence[Configuration]]],
    value: Callable[[Configuration], float | None],
) -> None:
    """Circle the noisy points of every line, with one legend entry for them all."""
    _mark(axes, lines, value, lambda c: c.noisy, "noisy (spread > 10%)", _NOISY_STYLE)


def _mark_busy(
    axes,
    lines: Sequence[tuple[str, Sequence[Configuration]]],
    value: Callable[[Configuration], float | None],
) -> None:
    """Cross the points of configurations with a run on a busy machine (not trusted), with
    one legend entry for them all."""
    _mark(
        axes, lines, value, lambda c: bool(c.busy_runs), "busy machine (not trusted)", _BUSY_STYLE
    )


def _mark(
    axes,
    lines: Sequence[tuple[str, Sequence[Configuration]]],
    value: Callable[[Configuration], float | None],
    chosen: Callable[[Configuration], bool],
    label: str,
    style: dict[str, Any],
) -> None:
    """Draw `style` over the `chosen` points of every line (x: cores), one legend entry."""
    points = [(c.cores, value(c)) for _, configs in lines for c in configs if chosen(c)]
    if points:
        axes.plot(
            [x for x, _ in points], [y for _, y in points], linestyle="none", label=label, **style
        )


def _no_accuracy_reason(section: WorkloadSection) -> str:
    if all(c.synthetic for c in section.configurations):
        return "synthetic data only: no accuracy claim is made"
    return "no real-data run was evaluated"


def new_figure(height: float = 4.2):
    """A report-styled figure (fixed width and dpi, no pyplot state) and its one axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(_WIDTH_IN, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def png_bytes(figure) -> bytes:
    """The figure as PNG bytes, reproducibly."""
    buffer = io.BytesIO()
    # No software/date metadata: the same data gives the same bytes. A tight box: a long
    # axis label grows the image rather than being cut at its edge.
    figure.savefig(
        buffer,
        format="png",
        dpi=_DPI,
        metadata={"Software": None},
        bbox_inches="tight",
        pad_inches=0.05,
    )
    return buffer.getvalue()


def _colors():
    from matplotlib import colormaps

    palette = colormaps["tab10"].colors
    index = 0
    while True:
        yield palette[index % len(palette)]
        index += 1


def _bar_height(count: int) -> float:
    return max(2.4, 1.0 + 0.45 * count)


def _wrap(label: str) -> str:
    label = label.replace("`", "")  # a plot has no code spans: the words, not the marks
    return "\n".join(textwrap.wrap(label, 38)) or label


def _short(text: str, width: int = 40) -> str:
    """`text` in at most `width` characters, cut in the middle: labels made of the settings
    that differ ('workers=1, threads_per_worker=1, precision=bf16') often differ only at
    their end, which a cut at the end would hide."""
    text = " ".join(text.replace("`", "").split())  # one line, as the tables fold it
    if len(text) <= width:
        return text
    head = (width - 3) // 2
    return text[:head] + "..." + text[len(text) - (width - 3 - head) :]
