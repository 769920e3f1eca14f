"""Quantities with units, as cluster files write them: "100 Gb/s", "5 us", "15.7 TFLOP/s".

A small parser rather than a units library: cluster files need three dimensions (bandwidth,
time, FLOP rate), and the one trap that matters is bits against bytes ("Gb/s" is a
network's bits, "GB/s" a bus's bytes). Every value must carry its unit; a bare number is
refused, because "100" for a bandwidth is as likely Gb/s as GB/s.

All results are SI base units: bytes per second, seconds, FLOP per second.
"""

from __future__ import annotations

import math
import re

_NUMBER = r"(?P<number>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}

# "100 Gb/s", "100Gbps", "12 GB/s", "12.5 GiB/s", "25 GbE" (Ethernet is quoted in bits).
_BANDWIDTH = re.compile(
    _NUMBER + r"\s*(?P<prefix>Ki|Mi|Gi|Ti|[kKMGTP]?)(?P<unit>b|B|bit|byte)"
    r"(?P<rate>/s|ps|E)$"
)
_TIME = re.compile(_NUMBER + r"\s*(?P<unit>ns|us|µs|μs|ms|s)$")
_FLOPS = re.compile(_NUMBER + r"\s*(?P<prefix>[kKMGTP]?)(?:FLOP/s|FLOPS|FLOPs|flop/s|flops)$")

_TIME_SCALE = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0}

BANDWIDTH_EXAMPLES = "'100 Gb/s', '25 GbE', '12 GB/s', '900 MB/s'"
TIME_EXAMPLES = "'5 us', '1.5 ms', '0.2 s'"
FLOPS_EXAMPLES = "'15.7 TFLOP/s', '312 TFLOPS'"


def _finite_non_negative(value: float, text: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite quantity")
    return value


def _check_text(text: object, what: str, examples: str) -> str:
    if isinstance(text, bool) or not isinstance(text, str):
        raise ValueError(f"{what} must be a string with a unit, like {examples}; got {text!r}")
    stripped = text.strip()
    if stripped.startswith("-"):
        raise ValueError(f"{what} must not be negative, got {text!r}")
    return stripped


def parse_bandwidth(text: object) -> float:
    """Bytes per second from '100 Gb/s', '100 Gbps', '25 GbE', '12 GB/s' or '12.5 GiB/s'.

    Lower-case b is bits, upper-case B bytes; 'GbE' is Ethernet's bit rate. Decimal prefixes
    (k, M, G, T, P) are powers of 1000, binary ones (Ki, Mi, Gi, Ti) powers of 1024.
    ValueError for anything else, a bare number included.
    """
    stripped = _check_text(text, "a bandwidth", BANDWIDTH_EXAMPLES)
    match = _BANDWIDTH.fullmatch(stripped)
    if match is None:
        raise ValueError(f"cannot read {text!r} as a bandwidth; write it like {BANDWIDTH_EXAMPLES}")
    unit, rate = match["unit"], match["rate"]
    if rate == "E" and unit != "b":
        raise ValueError(f"cannot read {text!r}: Ethernet rates are in bits, like '25 GbE'")
    prefix = match["prefix"]
    scale = _BINARY[prefix] if prefix in _BINARY else _DECIMAL[prefix]
    bytes_per_unit = 1.0 if unit in ("B", "byte") else 1.0 / 8.0
    value = float(match["number"]) * scale * bytes_per_unit
    if value <= 0:
        raise ValueError(f"a bandwidth must be positive, got {text!r}")
    return _finite_non_negative(value, stripped)


def parse_time(text: object) -> float:
    """Seconds from '5 us' (also 'µs'), '300 ns', '1.5 ms' or '0.2 s'; zero is allowed."""
    stripped = _check_text(text, "a time", TIME_EXAMPLES)
    match = _TIME.fullmatch(stripped)
    if match is None:
        raise ValueError(f"cannot read {text!r} as a time; write it like {TIME_EXAMPLES}")
    return _finite_non_negative(float(match["number"]) * _TIME_SCALE[match["unit"]], stripped)


def parse_flops(text: object) -> float:
    """FLOP per second from '15.7 TFLOP/s', '312 TFLOPS' or '900 GFLOP/s'."""
    stripped = _check_text(text, "a FLOP rate", FLOPS_EXAMPLES)
    match = _FLOPS.fullmatch(stripped)
    if match is None:
        raise ValueError(f"cannot read {text!r} as a FLOP rate; write it like {FLOPS_EXAMPLES}")
    value = float(match["number"]) * _DECIMAL[match["prefix"]]
    if value <= 0:
        raise ValueError(f"a FLOP rate must be positive, got {text!r}")
    return _finite_non_negative(value, stripped)


def format_bandwidth(bytes_per_s: float) -> str:
    """'12.5 GB/s' style, decimal prefixes, for tables."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if bytes_per_s >= scale:
            return f"{bytes_per_s / scale:.3g} {prefix}B/s"
    return f"{bytes_per_s:.3g} B/s"


def format_time(seconds: float) -> str:
    """'5 us', '1.2 ms', '0.31 s' style, for tables."""
    if seconds == 0:
        return "0 s"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"
