"""The simulator's plots as PNG bytes, in the report's style.

Each plot is its own `matplotlib.figure.Figure` on an Agg canvas: pyplot is never imported,
so no state is shared between plots or with a caller, and nothing needs a display. The same
data gives the same bytes (no date metadata).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.ticker import ScalarFormatter

from trainscale.reporting.plots import new_figure, png_bytes, slug
from trainscale.simulator.calibrate import Calibration
from trainscale.simulator.fit import TableFit
from trainscale.simulator.predict import Prediction
from trainscale.simulator.time_to_accuracy import TimeToAccuracyRow
from trainscale.simulator.validate import TARGET_MEDIAN_ABS_ERROR, ValidationReport

_IDEAL_STYLE = {"color": "0.45", "linestyle": "--", "linewidth": 1.2}


@dataclass(frozen=True)
class SimPlot:
    """One drawn plot."""

    file_name: str
    title: str
    png: bytes


def _workers_axis(axes, workers: Sequence[int]) -> None:
    axes.set_xscale("log", base=2)
    axes.set_xticks(list(workers))
    axes.set_xticklabels([str(w) for w in workers])
    axes.set_xlabel("workers")
    axes.grid(True, alpha=0.3)


UNCALIBRATED = "UNCALIBRATED"
"""Added to the title of a plot whose prediction rests on no measured run."""


def calibration_note(calibration: Calibration | None) -> str | None:
    """Why a prediction is uncalibrated, from what the calibration says of its source; None
    when it was calibrated from measured runs (or nothing is known)."""
    if calibration is None or calibration.source == "runs":
        return None
    if calibration.source == "workloads":
        return (
            f"{UNCALIBRATED} for this workload: compute time from a cost per operator and per "
            "FLOP fitted to other workloads' runs on the device, not from a run of this one"
        )
    return (
        f"{UNCALIBRATED}: compute time from the device's peak FLOP/s x an assumed efficiency "
        "(a cluster file's or a probe's), not from a measured run; `trainscale simulate "
        "--validate` checks a calibrated model"
    )


def _say_calibration(figure, axes, title: str, calibration: Calibration | None) -> str:
    """Set the plot's title, marked and annotated when the prediction is uncalibrated;
    returns the title."""
    note = calibration_note(calibration)
    if note is not None:
        title = f"{title} ({UNCALIBRATED})"
        figure.text(0.01, 0.005, textwrap.fill(note, 110), fontsize="x-small", color="tab:red")
        figure.get_layout_engine().set(rect=(0, 0.06, 1, 0.94))
    axes.set_title(title, fontsize="medium")
    return title


def scaling_plots(
    predictions: Sequence[Prediction],
    workload: str,
    cluster: str,
    calibration: Calibration | None = None,
) -> list[SimPlot]:
    """Predicted throughput and speedup against workers (with the ideal line), and the step
    split into compute, exposed communication, straggler wait and optimizer. With a
    `calibration` that measured no run, each title says UNCALIBRATED and why."""
    rows = sorted(predictions, key=lambda p: p.workers)
    workers = [p.workers for p in rows]
    name = f"{slug(workload)}-{slug(cluster)}"
    out = []

    figure, axes = new_figure()
    # The predicted one-worker throughput, from any row: speedup = samples/s over it.
    base = rows[0].samples_per_s / (rows[0].speedup or 1.0)
    axes.plot(workers, [p.samples_per_s for p in rows], marker="o", label="predicted")
    axes.plot(
        workers, [base * w for w in workers], label="ideal (linear in workers)", **_IDEAL_STYLE
    )
    _workers_axis(axes, workers)
    # Log-log: the ideal line is straight, and every doubling of workers gets equal room.
    axes.set_yscale("log")
    axes.set_ylabel("global samples/s (predicted)")
    axes.legend(fontsize="small")
    title = _say_calibration(
        figure, axes, f"Predicted throughput: {workload} on {cluster}", calibration
    )
    out.append(SimPlot(f"throughput-{name}.png", title, png_bytes(figure)))

    figure, axes = new_figure()
    axes.plot(workers, [p.speedup or 0.0 for p in rows], marker="o", label="predicted speedup")
    axes.plot(workers, workers, label="ideal", **_IDEAL_STYLE)
    _workers_axis(axes, workers)

    axes.set_yscale("log", base=2)
    axes.yaxis.set_major_formatter(ScalarFormatter())
    axes.set_ylabel("speedup vs 1 worker (predicted)")
    axes.legend(fontsize="small")
    title = _say_calibration(
        figure, axes, f"Predicted speedup: {workload} on {cluster}", calibration
    )
    out.append(SimPlot(f"speedup-{name}.png", title, png_bytes(figure)))

    figure, axes = new_figure()
    positions = list(range(len(rows)))
    parts = (
        ("compute (data, forward, backward)", lambda p: p.data_s + p.forward_s + p.backward_s),
        ("exposed communication", lambda p: p.exposed_comm_s),
        ("waiting for the slowest worker", lambda p: p.straggler_s),
        ("optimizer", lambda p: p.optimizer_s),
    )
    # Shares of the step, not milliseconds: under strong scaling the steps shrink by orders
    # of magnitude and the exposed share is what the plot is for.
    bottom = [0.0] * len(rows)
    for label, value in parts:
        heights = [100 * value(p) / p.step_time_s if p.step_time_s else 0.0 for p in rows]
        axes.bar(positions, heights, bottom=bottom, label=label)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    for x, p, top in zip(positions, rows, bottom, strict=True):
        axes.annotate(
            f"{1000 * p.step_time_s:.3g} ms",
            (x, top),
            ha="center",
            va="bottom",
            fontsize="x-small",
        )
    axes.set_xticks(positions)
    axes.set_xticklabels([str(w) for w in workers])
    axes.set_xlabel("workers")
    axes.set_ylabel("% of the predicted step (median step over each bar)")
    axes.set_ylim(0, 112)
    axes.legend(fontsize="small", loc="lower left")
    axes.grid(True, axis="y", alpha=0.3)
    title = _say_calibration(
        figure,
        axes,
        f"Predicted step and exposed communication: {workload} on {cluster}",
        calibration,
    )
    out.append(SimPlot(f"breakdown-{name}.png", title, png_bytes(figure)))
    return out


def validation_plots(report: ValidationReport) -> list[SimPlot]:
    """Predicted against measured step time (with the +-10% band), and each run's error."""
    if not report.rows:
        return []
    out = []
    figure, axes = new_figure(4.8)
    settings = sorted({r.setting for r in report.rows})
    for setting in settings:
        rows = [r for r in report.rows if r.setting == setting]
        axes.scatter(
            [1000 * r.measured_step_s for r in rows],
            [1000 * r.predicted_step_s for r in rows],
            label=setting,
            marker="x" if rows[0].oversubscribed else "o",
        )
    values = [1000 * v for r in report.rows for v in (r.measured_step_s, r.predicted_step_s)]
    low, high = min(values) * 0.8, max(values) * 1.25
    line = [low, high]
    axes.plot(line, line, label="predicted = measured", **_IDEAL_STYLE)
    band = TARGET_MEDIAN_ABS_ERROR
    axes.fill_between(
        line,
        [v * (1 - band) for v in line],
        [v * (1 + band) for v in line],
        color="0.85",
        alpha=0.5,
        label=f"+-{band:.0%}",
    )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("measured median step (ms)")
    axes.set_ylabel("predicted median step (ms)")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="x-small")
    title = "Simulator validation: predicted vs measured step time"
    axes.set_title(title, fontsize="medium")
    out.append(SimPlot("validation-scatter.png", title, png_bytes(figure)))

    out.append(
        _error_bars(
            "validation-errors.png",
            "Simulator validation: error per held-out run",
            [f"{r.workload} b{r.global_batch} {r.setting} [{r.run_id[:8]}]" for r in report.rows],
            [r.step_error for r in report.rows],
            "step-time error, predicted / measured - 1 (%); red: oversubscribed",
            band,
            colors=["tab:red" if r.oversubscribed else "tab:blue" for r in report.rows],
        )
    )
    return out


def _error_bars(
    file_name: str,
    title: str,
    labels: Sequence[str],
    errors: Sequence[float],
    xlabel: str,
    band: float,
    colors: Sequence[str] | str = "tab:blue",
) -> SimPlot:
    """One horizontal bar per prediction's relative error (%), with the +-band lines."""
    figure, axes = new_figure(max(3.0, 0.22 * len(labels) + 1.2))
    axes.barh(range(len(errors)), [100 * e for e in errors], color=colors)
    axes.axvline(0, color="0.3", linewidth=0.8)
    for edge in (-100 * band, 100 * band):
        axes.axvline(edge, **_IDEAL_STYLE)
    axes.set_yticks(range(len(labels)))
    axes.set_yticklabels(labels, fontsize="x-small")
    axes.invert_yaxis()
    axes.set_xlabel(xlabel)
    axes.grid(True, axis="x", alpha=0.3)
    axes.set_title(title, fontsize="medium")
    return SimPlot(file_name, title, png_bytes(figure))


def time_to_accuracy_plot(
    rows: Sequence[TimeToAccuracyRow],
    workload: str,
    cluster: str,
    calibration: Calibration | None = None,
) -> list[SimPlot]:
    """Predicted time to target against workers, one line per mode and per-worker batch
    (titled UNCALIBRATED when `calibration` measured no run)."""
    reached = [r for r in rows if r.time_to_target_s is not None]
    if not reached:
        return []
    figure, axes = new_figure()
    lines: dict[tuple[str, int], list[TimeToAccuracyRow]] = {}
    for row in reached:
        key = (row.setting.mode, row.setting.per_worker_batch_size)
        lines.setdefault(key, []).append(row)
    for (mode, batch), members in sorted(lines.items()):
        members.sort(key=lambda r: r.setting.workers)
        axes.plot(
            [r.setting.workers for r in members],
            [r.time_to_target_s for r in members],
            marker="o",
            label=f"{mode}, {batch} per worker",
        )
    workers = sorted({r.setting.workers for r in reached})
    _workers_axis(axes, workers)
    axes.set_ylabel("predicted time to target (s)")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    title = _say_calibration(
        figure, axes, f"Predicted time to accuracy: {workload} on {cluster}", calibration
    )
    name = f"time-to-accuracy-{slug(workload)}-{slug(cluster)}.png"
    return [SimPlot(name, title, png_bytes(figure))]


def published_plots(fits: Sequence[TableFit]) -> list[SimPlot]:
    """Per table, published and predicted throughput (or efficiency) against devices, the
    fit points filled and the held-out ones hollow; then every held-out point's error."""
    out = []
    for fit in fits:
        figure, axes = new_figure()
        points = sorted(fit.points, key=lambda p: p.devices)
        devices = [p.devices for p in points]
        measure = points[0].measure
        axes.plot(devices, [p.predicted for p in points], marker=".", label="predicted")
        for role, face in (("fit", "tab:orange"), ("held out", "none")):
            chosen = [p for p in points if p.role == role]
            if chosen:
                axes.scatter(
                    [p.devices for p in chosen],
                    [p.published for p in chosen],
                    facecolors=face,
                    edgecolors="tab:orange",
                    s=40,
                    zorder=3,
                    label=f"published ({role})",
                )
        _workers_axis(axes, devices)
        axes.set_xlabel("devices")
        if measure == "images/s":
            axes.set_yscale("log")
        axes.set_ylabel(measure)
        error = fit.median_abs_error()
        said = f"median |error| held out {error:.1%}" if error is not None else "all points fitted"
        title = f"{fit.table}: {fit.model} on {fit.cluster} ({said})"
        axes.set_title(textwrap.fill(title, 70), fontsize="small")
        axes.legend(fontsize="x-small")
        out.append(SimPlot(f"published-{slug(fit.table)}.png", title, png_bytes(figure)))
    held = [(fit, p) for fit in fits for p in fit.held_out]
    if held:
        out.append(
            _error_bars(
                "published-errors.png",
                "Held-out published points",
                [f"{fit.table} {p.devices} dev" for fit, p in held],
                [p.error for _, p in held],
                "predicted / published - 1 (%)",
                TARGET_MEDIAN_ABS_ERROR,
            )
        )
    return out
