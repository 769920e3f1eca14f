"""The simulator's tables (rich), printed on the console the command gives them."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trainscale.simulator.buckets import GradientLayout
from trainscale.simulator.calibrate import Calibration
from trainscale.simulator.cluster import ClusterSpec, LinkSpec
from trainscale.simulator.predict import Prediction
from trainscale.simulator.time_to_accuracy import TimeToAccuracyRow, best_by_mode
from trainscale.simulator.units import format_bandwidth, format_time
from trainscale.simulator.validate import TARGET_MEDIAN_ABS_ERROR, ValidationReport


def _link(spec: LinkSpec | None) -> str:
    if spec is None:
        return "-"
    name = f"{spec.name}: " if spec.name else ""
    return f"{name}{format_time(spec.alpha_s)}, {format_bandwidth(spec.bandwidth_bytes_per_s)}"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:.1f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}%"


def describe_setup(
    cluster: ClusterSpec, calibration: Calibration, layout: GradientLayout
) -> list[str]:
    """Lines that say what a prediction stands on."""
    nodes = "open" if cluster.nodes is None else str(cluster.nodes)
    network = calibration.network or cluster.intra_node
    lines = [
        f"cluster [bold]{escape(cluster.name)}[/] ({escape(cluster.origin)}): nodes {nodes} x "
        f"{cluster.devices_per_node} {escape(cluster.device.name)} ({cluster.device.kind}); "
        f"intra-node {escape(_link(network))}; inter-node {escape(_link(cluster.inter_node))}; "
        f"{cluster.algorithm}, overlap {cluster.overlap:g}",
    ]
    runs = ", ".join(r[:8] for r in calibration.run_ids) or "none"
    fixed = f"{1000 * calibration.compute_fixed_s:.2f} ms + " if calibration.compute_fixed_s else ""
    lines.append(
        f"calibration ({calibration.source}; runs {runs}): forward+backward {fixed}"
        f"{1000 * calibration.compute_s_per_sample:.3f} ms/sample, backward share "
        f"{calibration.backward_share:.2f}, optimizer {_ms(calibration.optimizer_s)} ms, "
        f"straggler sigma {calibration.straggler_sigma:.3f}"
    )
    lines.append(
        f"gradients: {layout.total_bytes / 1e6:.2f} MB in {len(layout.buckets)} bucket(s) "
        f"({layout.num_tensors} tensors; backward spread by {layout.weights_from})"
    )
    lines.extend(f"note: {escape(note)}" for note in calibration.notes)
    return lines


def print_predictions(
    console: Console,
    workload: str,
    cluster: ClusterSpec,
    calibration: Calibration,
    layout: GradientLayout,
    predictions: Sequence[Prediction],
) -> None:
    """The prediction table and what it stands on."""
    table = Table(title=f"trainscale simulate: {workload} on {cluster.name}")
    headers = (
        "workers",
        "nodes",
        "batch/worker",
        "global batch",
        "step ms",
        "samples/s",
        "speedup",
        "efficiency",
        "compute ms",
        "comm ms",
        "exposed comm ms",
        "exposed share",
        "straggler ms",
    )
    for header in headers:
        table.add_column(header, justify="right")
    for p in predictions:
        table.add_row(
            str(p.workers),
            str(p.nodes),
            str(p.per_worker_batch),
            str(p.global_batch),
            _ms(p.step_time_s),
            f"{p.samples_per_s:.1f}",
            f"{p.speedup:.2f}" if p.speedup is not None else "-",
            f"{100 * p.efficiency:.0f}%" if p.efficiency is not None else "-",
            _ms(p.data_s + p.forward_s + p.backward_s),
            _ms(p.comm_s),
            _ms(p.exposed_comm_s),
            f"{100 * p.exposed_comm_share:.0f}%",
            _ms(p.straggler_s),
        )
    console.print(table)
    for line in describe_setup(cluster, calibration, layout):
        console.print(line)
    if cluster.device.kind == "cpu":
        console.print("note: one worker per device; the model does not model oversubscribed cores")


def print_validation(console: Console, report: ValidationReport) -> None:
    """Predicted against measured, run by run, then by setting and overall."""
    table = Table(title="trainscale simulate --validate: held-out runs")
    headers: tuple[str, ...] = (
        "run",
        "workload",
        "global batch",
        "setting",
        "measured step ms",
        "predicted step ms",
        "error",
        "measured samples/s",
        "predicted samples/s",
        "error",
        "speedup (meas / pred)",
        "exposed comm ms (meas / pred)",
    )
    for header in headers:
        table.add_column(header, justify="left" if header in ("setting", "workload") else "right")
    for row in report.rows:
        exposed = f"{_ms(row.measured_exposed_comm_s)} / {_ms(row.predicted_exposed_comm_s)}"
        speedup = (
            f"{row.measured_speedup:.2f} / {row.predicted_speedup:.2f}"
            if row.measured_speedup is not None and row.predicted_speedup is not None
            else "-"
        )
        table.add_row(
            row.run_id[:8],
            row.workload,
            str(row.global_batch),
            row.setting,
            _ms(row.measured_step_s),
            _ms(row.predicted_step_s),
            _pct(row.step_error),
            f"{row.measured_samples_per_s:.1f}",
            f"{row.predicted_samples_per_s:.1f}",
            _pct(row.throughput_error),
            speedup,
            exposed if row.workers > 1 else "-",
        )
    console.print(table)

    settings = Table(title="by setting")
    headers = (
        "setting",
        "runs",
        "median |step error|",
        "median step error",
        "median speedup error",
        "modelled",
    )
    for header in headers:
        settings.add_column(header, justify="left" if header == "setting" else "right")
    for entry in report.by_setting():
        settings.add_row(
            entry["setting"],
            str(entry["runs"]),
            f"{100 * entry['median_abs_step_error']:.1f}%",
            _pct(entry["median_step_error"]),
            _pct(entry["median_speedup_error"]),
            "yes" if entry["modelled"] else "no (oversubscribed)",
        )
    console.print(settings)

    overall = report.median_abs_error()
    modelled = report.median_abs_error(modelled_only=True)
    target = TARGET_MEDIAN_ABS_ERROR
    console.print(
        f"median |step-time error|: {100 * overall:.1f}% over {len(report.rows)} held-out "
        "run(s)"
        + (
            f"; {100 * modelled:.1f}% over the {sum(r.modelled for r in report.rows)} the model "
            "describes (not oversubscribed)"
            if modelled is not None
            else ""
        )
    )
    throughput = report.median_abs_error(modelled_only=True, throughput=True)
    if throughput is not None:
        console.print(f"median |throughput error| (modelled runs): {100 * throughput:.1f}%")
    speedup_error = report.median_abs_speedup_error()
    if speedup_error is not None:
        console.print(
            f"median |speedup error| (modelled multi-worker runs, each against the serial run "
            f"at its global batch measured nearest in time): {100 * speedup_error:.1f}%"
        )
    if modelled is not None:
        verdict = "met" if modelled <= target else "not met"
        console.print(f"target: median |error| <= {target:.0%} on modelled runs: {verdict}")
    console.print(
        "exposed comm: measured from the last gradient bucket ready to the end of backward; "
        "predicted as the time the step waits for communication (all of it where "
        "communication does not overlap compute, as on CPU workers)"
    )
    console.print(f"calibration runs: {', '.join(r[:8] for r in report.calibration_run_ids)}")
    for calibration in report.calibrations:
        for note in calibration.notes:
            console.print(f"note ({calibration.workload}): {note}")
    for run_id, reason in report.skipped:
        console.print(f"skipped {run_id[:8]}: {reason}")


def print_clusters(console: Console, presets: Sequence[ClusterSpec]) -> None:
    """The presets with their figures and where the figures come from."""
    table = Table(title="cluster presets (`--cluster NAME`; 'local' = this machine)")
    for header in ("name", "nodes x devices", "device", "intra-node", "inter-node", "exchange"):
        table.add_column(header, no_wrap=header == "name")
    for p in presets:
        peaks = ", ".join(f"{k} {v / 1e12:.3g} TFLOP/s" for k, v in p.device.peak_flops.items())
        device = f"{p.device.name} ({p.device.kind}); {peaks}"
        if p.device.efficiency is not None:
            device += f" x {p.device.efficiency:g}"
        nodes = "open" if p.nodes is None else str(p.nodes)
        table.add_row(
            p.name,
            f"{nodes} x {p.devices_per_node}",
            device,
            _link(p.intra_node),
            _link(p.inter_node),
            f"{p.algorithm}, overlap {p.overlap:g}",
        )
    console.print(table)
    for p in presets:
        console.print(f"[bold]{p.name}[/]: {p.description}")
        console.print(f"  source: {p.source}")
        for label, text in (
            ("device", p.device.source),
            ("intra-node", p.intra_node.source),
            ("inter-node", p.inter_node.source if p.inter_node else ""),
        ):
            if text:
                console.print(f"  {label}: {text}")


def print_time_to_accuracy(
    console: Console,
    workload: str,
    cluster: ClusterSpec,
    calibration: Calibration,
    layout: GradientLayout,
    rows: Sequence[TimeToAccuracyRow],
) -> None:
    """Steps to target x predicted step time, and where more hardware stops helping."""
    table = Table(title=f"trainscale predict-time-to-accuracy: {workload} on {cluster.name}")
    headers = (
        "run",
        "mode",
        "workers",
        "global batch",
        "steps to target",
        "step ms (predicted)",
        "time to target",
        "device-hours",
        "notes",
    )
    for header in headers:
        table.add_column(header, justify="left" if header in ("mode", "notes") else "right")
    for row in rows:
        s = row.setting
        mode = s.mode + (f" (H={s.local_steps})" if s.local_steps else "")
        table.add_row(
            s.run_id[:8],
            mode,
            str(s.workers),
            str(s.global_batch_size),
            str(s.steps_to_target) if s.steps_to_target is not None else "not reached",
            _ms(row.step_time_s),
            format_time(row.time_to_target_s) if row.time_to_target_s is not None else "-",
            f"{row.device_seconds / 3600:.3g}" if row.device_seconds is not None else "-",
            "; ".join(row.notes),
        )
    console.print(table)
    for mode, best in best_by_mode(rows).items():
        line = (
            f"{mode}: fastest at {best['fastest_workers']} workers (global batch "
            f"{best['fastest_global_batch_size']}), {format_time(best['fastest_time_to_target_s'])}"
        )
        if best["more_workers_slower"]:
            more = ", ".join(str(w) for w in best["more_workers_slower"])
            line += f"; more workers ({more}) do not train faster: more hardware stops paying here"
        console.print(line)
    for line in describe_setup(cluster, calibration, layout):
        console.print(line)
