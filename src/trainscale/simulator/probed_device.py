"""The machine at hand's device with what `trainscale probe` measured on it.

Without a stored run of a workload on a device, the simulator computes a step from the
device's peak FLOP/s x efficiency and a fixed cost per dispatched operator
(`calibrate.calibrate_from_peak`). A cluster file states those; for the machine at hand
(`--cluster local`) the newest trusted probes of the host measure them: the matmul rate
per precision stands for the peak, and the per-operator overhead (`probe.dispatch`) for the
fixed cost. Training does not reach a large matmul's rate, so the rate is taken at
PROBED_EFFICIENCY, an assumption the notes state (a stored run of the workload replaces all
of this with measured figures).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trainscale.errors import TrainscaleError
from trainscale.metrics.run_flags import ran_busy
from trainscale.simulator.cluster import DeviceSpec

PROBED_EFFICIENCY = 0.5
"""Share of the probe's best matmul rate a training step's arithmetic is taken to reach: the
presets assume 0.35 of a datasheet peak, which a large matmul reaches at about 0.7."""


def newest_probe(store: Any, kind: str, host: str | None, device_type: str) -> Any | None:
    """The newest trusted probe of `kind` on `host` and `device_type`, or None: quick probes
    check the machinery and a busy one measured its neighbours too, so neither is a figure
    (a store without probes has none)."""
    lister = getattr(store, "list_probes", None)
    if lister is None or host is None:
        return None
    try:
        probes = lister(kind=kind, host=host, device_type=device_type)
    except TrainscaleError:
        return None
    for probe in probes:
        result = probe.result or {}
        busy = ran_busy(result)
        if not result.get("quick") and not busy:
            return probe
    return None


def probed_peaks(result: Mapping[str, Any], cores: int | None) -> dict[str, float]:
    """Per precision, the matmul probe's best FLOP/s, for `cores` cores when the probe ran on
    another number of threads (a CPU worker computes on its own cores only)."""
    threads = result.get("threads")
    scale = cores / threads if cores and isinstance(threads, int) and threads > 0 else 1.0
    peaks = {}
    for precision, figures in (result.get("precisions") or {}).items():
        rate = figures.get("best_flops_per_s") if isinstance(figures, Mapping) else None
        if isinstance(rate, (int, float)) and rate > 0:
            peaks[precision] = float(rate) * scale
    return peaks


def with_probed_costs(device: DeviceSpec, store: Any, host: str | None) -> DeviceSpec:
    """`device` with the peak FLOP/s (x PROBED_EFFICIENCY) and per-operator overhead the
    newest probes of `host` measured; unchanged where none did."""
    matmul = newest_probe(store, "matmul", host, device.kind)
    dispatch = newest_probe(store, "dispatch", host, device.kind)
    cores = device.cores if device.kind == "cpu" else None
    peaks = probed_peaks(matmul.result or {}, cores) if matmul is not None else {}
    overhead = (dispatch.result or {}).get("seconds_per_op") if dispatch is not None else None
    if not (isinstance(overhead, (int, float)) and overhead > 0):
        overhead = None
    sources = []
    if matmul is not None and peaks:
        sources.append(
            f"matmul probe {matmul.short_id} ({matmul.created_at[:10]}) at efficiency "
            f"{PROBED_EFFICIENCY:g} (an assumption)"
        )
    if dispatch is not None and overhead is not None:
        sources.append(
            f"dispatch probe {dispatch.short_id} ({dispatch.created_at[:10]}): "
            f"{overhead * 1e6:.3g} us per operator"
        )
    if not sources:
        return device
    return replace(
        device,
        peak_flops=peaks or device.peak_flops,
        efficiency=PROBED_EFFICIENCY if peaks else device.efficiency,
        op_overhead_s=float(overhead) if overhead is not None else device.op_overhead_s,
        source="; ".join([device.source, *sources]),
    )
