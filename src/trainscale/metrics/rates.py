"""Rates as people read them: FLOP/s and bytes per second in the unit that suits the size.
One wording for the probe's summary and the list of stored probes."""

from __future__ import annotations


def flops_text(flops_per_s: float) -> str:
    """1.2e12 -> '1.20 TFLOP/s', 9.86e10 -> '98.6 GFLOP/s'."""
    if flops_per_s >= 1e12:
        return f"{flops_per_s / 1e12:.2f} TFLOP/s"
    return f"{flops_per_s / 1e9:.1f} GFLOP/s"


def bandwidth_text(bytes_per_s: float) -> str:
    """1.23e9 -> '1.23 GB/s' (decimal units, as bandwidths are quoted)."""
    return f"{bytes_per_s / 1e9:.2f} GB/s"
