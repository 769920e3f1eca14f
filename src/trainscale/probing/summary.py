"""A probe's result as lines of text: the matmul figures against the theoretical peak, the
host-device copies, the all-reduce table with its alpha-beta fit, and where it was stored."""

from __future__ import annotations

from typing import Any

from trainscale.metrics.rates import bandwidth_text, flops_text
from trainscale.metrics.run_flags import NOT_TRUSTED, ran_busy
from trainscale.probing.run import format_bytes


def summary_lines(result: dict[str, Any], quick: bool = False) -> list[str]:
    """The human-readable account of a probe (`run_probe`'s result; `quick`: it was one)."""
    lines = [f"probe of {result['device_type']} '{result['device']}' on host {result['host']}"]
    if quick:
        lines.append("(--quick: small sizes; these figures check the machinery, not the machine)")
    busy = busy_line(result)
    if busy:
        lines.append(busy)
    matmul = result.get("matmul")
    if matmul:
        threads = f", {matmul['threads']} thread(s)" if matmul.get("threads") else ""
        lines.append(f"matmul (best of {matmul['repeats']}{threads}):")
        for precision, figures in matmul["precisions"].items():
            peak = matmul["theoretical_peak"].get(precision)
            share = figures.get("fraction_of_theoretical_peak")
            versus = (
                f" = {share:.1%} of the theoretical {flops_text(peak['tflops'] * 1e12)}"
                if peak and share is not None
                else " (no theoretical peak in the table)"
            )
            if peak and share is not None and share > 1:
                # A theoretical peak cannot be beaten: the clock it assumes was not the
                # cores' (its source, which `trainscale env` shows, names that clock).
                versus += ": the cores ran faster than the clock it assumes (trainscale env)"
            best = flops_text(figures["best_flops_per_s"])
            lines.append(f"  {precision}: {best} at n={figures['best_size']}{versus}")
            for row in figures["by_size"]:
                if "skipped" in row:
                    lines.append(f"    n={row['n']} not timed: {row['skipped']}")
    dispatch = result.get("dispatch")
    if dispatch:
        lines.append(
            f"per-operator overhead: {dispatch['seconds_per_op'] * 1e6:.1f} us per forward + "
            f"backward operator ({dispatch['seconds_per_step'] * 1e6:.0f} us a step of "
            f"{dispatch['forward_backward_ops']} such operators, {dispatch['step_ops']} with the "
            "optimizer's)"
        )
    transfer = result.get("transfer")
    if transfer:
        h2d = bandwidth_text(transfer["h2d"]["best_bytes_per_s"])
        d2h = bandwidth_text(transfer["d2h"]["best_bytes_per_s"])
        lines.append(f"host-device copies (pinned): host->device {h2d}, device->host {d2h}")
    allreduce = result.get("allreduce")
    if allreduce:
        lines.append(f"all-reduce ({allreduce['backend']}, {allreduce['workers']} processes):")
        lines.append("  size        time        algbw       busbw")
        for point in allreduce["points"]:
            lines.append(
                f"  {format_bytes(point['size_bytes']):>9}  {point['time_s'] * 1e6:>9.1f} us"
                f"  {bandwidth_text(point['algbw_bytes_per_s']):>10}  "
                f"{bandwidth_text(point['busbw_bytes_per_s']):>10}"
            )
        fit = allreduce["fit"]
        bandwidth = fit["bandwidth_bytes_per_s"]
        lines.append(
            f"  alpha-beta fit: alpha {fit['alpha_s'] * 1e6:.1f} us, beta "
            f"{fit['beta_s_per_byte'] * 1e9:.4f} ns/byte"
            + (f" (1/beta = {bandwidth_text(bandwidth)})" if bandwidth else "")
            + f", worst point off by {fit['max_relative_error']:.0%}"
        )
    for kind, why in result.get("skipped", {}).items():
        lines.append(f"{kind}: not measured ({why})")
    ids = ", ".join(f"{kind} {probe_id[:8]}" for kind, probe_id in result["probe_ids"].items())
    listed = " (`trainscale runs probes` lists them)" if ids else ""
    lines.append(f"stored in {result['store']}: {ids or 'nothing'}{listed}")
    return lines


def busy_line(result: dict[str, Any]) -> str | None:
    """The warning of a probe that measured while other work used the machine (the busy
    rule, metrics/run_flags.py): its figures are stored and shown, marked not trusted."""
    if not ran_busy(result):
        return None
    contention = result["contention"]
    neighbours = ", ".join(result.get("busiest") or []) or "other processes"
    return (
        f"{NOT_TRUSTED}: {contention.get('reason', 'other work used the cores')}; using the "
        f"cores: {neighbours}: stop that work, or probe again when the machine is quiet"
    )
