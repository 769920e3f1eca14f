"""How `trainscale simulate` prints what it computed: JSON, or tables and notes."""

from __future__ import annotations

from typing import Any

from trainscale.cli.lines import print_json


def print_result(result: Any, as_json: bool) -> int:
    """Print a simulate result (scaling, validation, presets, published fits); exit 0."""
    from trainscale.cli.console import table_console
    from trainscale.simulator import run as simulator
    from trainscale.simulator import tables
    from trainscale.simulator.published_run import PublishedFitResult

    if as_json:
        print_json(result.to_dict())
        return 0
    console = table_console()
    if isinstance(result, simulator.ClusterPresets):
        tables.print_clusters(console, result.presets)
    elif isinstance(result, simulator.ScalingResult):
        tables.print_predictions(
            console,
            result.workload,
            result.cluster,
            result.calibration,
            result.layout,
            result.predictions,
        )
    elif isinstance(result, PublishedFitResult):
        print_published(result)
    else:
        tables.print_validation(console, result.report)
    for path in result.plots:
        print(f"wrote {path}")
    return 0


def print_table(title: str, headers: list[str], rows: list[list[str]]) -> None:
    from trainscale.cli.console import column_table, emit, stdout_console

    console = stdout_console()
    print(title)
    emit(console, column_table(console, [(h, "left") for h in headers], rows))


def print_published(result: Any) -> None:
    for fit in result.fits:
        rows = [
            [
                str(p.devices),
                str(p.nodes),
                str(p.batch_per_device),
                p.role,
                p.measure,
                f"{p.published:.4g}",
                f"{p.predicted:.4g}",
                f"{p.error:+.1%}",
            ]
            for p in sorted(fit.points, key=lambda p: p.devices)
        ]
        fitted, prior = fit.fitted, fit.prior
        print_table(
            f"{fit.table}: {fit.model} on {fit.cluster} ({fit.precision})",
            ["devices", "nodes", "batch/dev", "role", "measure", "published", "predicted", "error"],
            rows,
        )
        print(
            f"fitted: efficiency {fitted.efficiency:.3f} (file {prior.efficiency:.3f}), "
            f"overhead {fitted.overhead_s * 1e3:.2f} ms/step (file "
            f"{prior.overhead_s * 1e3:.2f}), spread {fitted.straggler_sigma:.3f} (file "
            f"{prior.straggler_sigma:.3f}), bandwidth x{fitted.bandwidth_scale:.2f} of nominal"
        )
        for note in fit.notes:
            print(f"note: {note}")
    error = result.median_abs_error()
    if error is not None:
        count = len(result.held_out_errors())
        print(f"median |error| over {count} held-out published points: {error:.1%}")
