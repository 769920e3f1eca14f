"""`trainscale runs probes`: the stored measurements of `trainscale probe`, newest first, each
with its headline figure and what makes it no yardstick: a quick probe is never one (runs'
MFU and the simulator pass it over), and the simulator passes over a busy one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainscale.hardware.peaks import in_precision_order
from trainscale.metrics.rates import bandwidth_text, flops_text
from trainscale.metrics.run_flags import ran_busy
from trainscale.reporting.listing import open_for_reading, short_time
from trainscale.results.records import ProbeRecord

PROBE_COLUMNS = (
    ("probe", "left"),
    ("created (UTC)", "left"),
    ("kind", "left"),
    ("device", "left"),
    ("host", "left"),
    ("figures", "left"),
    ("note", "left"),
)
"""The columns of a list of probes, and how each is justified."""


@dataclass
class ProbeList:
    """Stored probes, newest first, as asked for."""

    store: Path
    probes: list[ProbeRecord]
    kind: str | None
    """The kind asked for (None: every kind)."""

    @property
    def empty_message(self) -> str:
        what = f"{self.kind} probes" if self.kind else "probes"
        return f"no {what} in {self.store} (measure with `trainscale probe`)"

    def rows(self) -> list[list[str]]:
        """One row of cells per probe (`PROBE_COLUMNS`)."""
        return [
            [
                probe.short_id,
                short_time(probe.created_at),
                probe.kind,
                f"{probe.device_type or '?'}: {probe.device or '?'}",
                probe.host or "?",
                headline(probe),
                ", ".join(caveats(probe)),
            ]
            for probe in self.probes
        ]

    def to_dicts(self) -> list[dict[str, Any]]:
        """Every probe as plain data (`--json`): its row's fields and the stored result."""
        return [probe_to_dict(probe) for probe in self.probes]


def list_probes(
    store: str | Path | None = None, kind: str | None = None, limit: int | None = None
) -> ProbeList:
    """The stored probes (of `kind`, or all), at most `limit`, newest first."""
    with open_for_reading(store) as opened:
        return ProbeList(opened.path, opened.list_probes(kind=kind, limit=limit), kind)


def probe_to_dict(probe: ProbeRecord) -> dict[str, Any]:
    """The probe as plain data (its object of `--json`): its row's fields and the result."""
    return {
        "probe_id": probe.probe_id,
        "created_at": probe.created_at,
        "kind": probe.kind,
        "host": probe.host,
        "device_type": probe.device_type,
        "device": probe.device,
        "workers": probe.workers,
        "caveats": caveats(probe),
        "result": probe.result,
    }


def headline(probe: ProbeRecord) -> str:
    """What the probe found, in a few words ('' where the stored result lacks it)."""
    result = probe.result
    try:
        if probe.kind == "matmul":
            found = result["precisions"]
            return ", ".join(
                f"{precision} {flops_text(found[precision]['best_flops_per_s'])}"
                for precision in in_precision_order(found)
            )
        if probe.kind == "dispatch":
            return f"{result['seconds_per_op'] * 1e6:.1f} us per operator"
        if probe.kind == "transfer":
            return ", ".join(
                f"{way} {bandwidth_text(result[way]['best_bytes_per_s'])}" for way in ("h2d", "d2h")
            )
        if probe.kind == "allreduce":
            fit = result["fit"]
            bandwidth = fit.get("bandwidth_bytes_per_s")
            inverse = f", 1/beta {bandwidth_text(bandwidth)}" if bandwidth else ""
            return f"{probe.workers} workers: alpha {fit['alpha_s'] * 1e6:.1f} us{inverse}"
    except (KeyError, TypeError, AttributeError):  # a row written by an older version
        return ""
    return ""


def caveats(probe: ProbeRecord) -> list[str]:
    """Why the probe is no yardstick: 'quick' (a smoke test's sizes), 'busy' (other work
    used the cores while it measured)."""
    found = []
    if probe.result.get("quick"):
        found.append("quick")
    if ran_busy(probe.result):
        found.append("busy")
    return found
