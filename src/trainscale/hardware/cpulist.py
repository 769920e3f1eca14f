"""Linux cpulists: the text form of a set of cores (``"0-3,8-11"``).

The form of ``/sys/devices/system/node/node*/cpulist`` and of ``taskset -c``. One parser
serves the machine's NUMA map (`hardware.facts`) and the user's ``--affinity`` sets
(`parallel.affinity`), so both accept and refuse the same text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from trainscale.errors import ConfigError

# One cpulist item: "5" or "0-3". ASCII digits only: str.isdigit() would accept "²".
_CPULIST_ITEM = re.compile(r"(?P<start>[0-9]+)(?:\s*-\s*(?P<stop>[0-9]+))?")

MAX_CPUS = 8192
"""Linux numbers at most 8,192 CPUs (CONFIG_NR_CPUS): a core beyond is a typo, refused
before its range is spelled out (0-99999999999 took minutes and gigabytes to expand)."""


def parse_cpulist(text: str) -> list[int]:
    """Parse a Linux cpulist such as ``"0-3,8-11"`` into ``[0, 1, 2, 3, 8, 9, 10, 11]``.

    The format is the one of ``/sys/devices/system/node/node*/cpulist`` and of ``taskset -c``:
    comma-separated core numbers or inclusive ranges ``a-b``. Cores are returned in the order
    written. An empty or blank string gives ``[]`` (a memory-only NUMA node has an empty
    cpulist). Malformed items, reversed ranges and repeated cores raise `ConfigError` naming
    the offending text, because the same parser reads the user's ``--affinity`` sets.
    """
    stripped = text.strip()
    if not stripped:
        return []
    cores: list[int] = []
    seen: set[int] = set()
    for raw_item in stripped.split(","):
        item = raw_item.strip()
        match = _CPULIST_ITEM.fullmatch(item)
        if match is None:
            raise ConfigError(
                f"invalid core list {text.strip()!r}: {item!r} is not a core number "
                "or a range like 0-3"
            )
        start = int(match["start"])
        stop = int(match["stop"]) if match["stop"] is not None else start
        if stop < start:
            raise ConfigError(f"invalid core list {text.strip()!r}: range {item!r} is reversed")
        if stop >= MAX_CPUS:
            raise ConfigError(
                f"invalid core list {text.strip()!r}: core {stop} is past the {MAX_CPUS:,} "
                "CPUs Linux numbers"
            )
        for core in range(start, stop + 1):
            if core in seen:
                raise ConfigError(
                    f"invalid core list {text.strip()!r}: core {core} is listed twice"
                )
            seen.add(core)
            cores.append(core)
    return cores


def format_cpulist(cores: Iterable[int]) -> str:
    """Format cores as a compact cpulist, the inverse of `parse_cpulist`.

    ``[0, 1, 2, 5]`` gives ``"0-2,5"``. Cores are sorted and de-duplicated first; an empty
    collection gives ``""``.
    """
    ordered = sorted(set(cores))
    parts: list[str] = []
    index = 0
    while index < len(ordered):
        start = ordered[index]
        while index + 1 < len(ordered) and ordered[index + 1] == ordered[index] + 1:
            index += 1
        stop = ordered[index]
        parts.append(str(start) if start == stop else f"{start}-{stop}")
        index += 1
    return ",".join(parts)
