"""Facts about the machine a run executes on.

Every stored result carries these facts (CPU model, cores, NUMA layout, bf16 support, GPUs,
library versions, git revision) because a speedup figure means nothing without the hardware
that produced it. Nothing here runs at import time: torch is imported inside the functions,
so `trainscale --help` and the affinity planner (which only needs `parse_cpulist`) stay cheap.

The /proc and /sys roots are module-level defaults and function parameters so that tests can
point them at fake files.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainscale.errors import ConfigError

PROC_ROOT = Path("/proc")
"""Default root of the proc filesystem (tests pass their own)."""

SYS_ROOT = Path("/sys")
"""Default root of the sysfs filesystem (tests pass their own)."""

FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
"""x86 CPU flags that decide how fast fp32 and bf16 training runs on the CPU."""

# Flags that mean bf16 matrix maths runs in hardware. aarch64 reports "bf16" in its
# Features line (e.g. Graviton3, Neoverse V1/N2).
_NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})

# One cpulist item: "5" or "0-3". ASCII digits only: str.isdigit() would accept "²".
_CPULIST_ITEM = re.compile(r"(?P<start>[0-9]+)(?:\s*-\s*(?P<stop>[0-9]+))?")

GIT_TIMEOUT_S = 2.0
"""How long one git query may take before the revision is reported as unknown."""

_GIT_LOCATION_VARS = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
    }
)


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


def read_cpuinfo(proc_root: Path | None = None) -> dict[str, Any]:
    """Read the CPU model, vendor and flags from ``<proc_root>/cpuinfo`` (first processor only).

    Returns ``{"model": str | None, "vendor": str | None, "flags": set[str] | None}``; ``flags``
    is None when the file cannot be read or has no flags line (so callers can tell "no AVX2"
    from "unknown").
    """
    root = PROC_ROOT if proc_root is None else Path(proc_root)
    info: dict[str, Any] = {"model": None, "vendor": None, "flags": None}
    try:
        text = (root / "cpuinfo").read_text(errors="replace")
    except OSError:
        return info
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if info["flags"] is not None:
                break  # a blank line ends the first processor; the rest repeat it
            continue
        key, value = key.strip(), value.strip()
        if key == "model name" and info["model"] is None:
            info["model"] = value
        elif key == "vendor_id" and info["vendor"] is None:
            info["vendor"] = value
        elif key == "CPU implementer" and info["vendor"] is None:
            info["vendor"] = value  # aarch64: implementer code, e.g. 0x41 = Arm
        elif key in ("flags", "Features") and info["flags"] is None:
            info["flags"] = set(value.split())
    return info


def read_numa_nodes(sys_root: Path | None = None) -> list[dict[str, Any]]:
    """List NUMA nodes as ``[{"node": 0, "cpus": [0, 1, ...]}, ...]`` sorted by node number.

    Reads ``<sys_root>/devices/system/node/node*/cpulist``. Returns ``[]`` when the directory is
    missing or any file is unreadable or malformed: a partial NUMA map would mislead the
    ``spread`` affinity more than no map at all.
    """
    root = SYS_ROOT if sys_root is None else Path(sys_root)
    node_dir = root / "devices" / "system" / "node"
    nodes: list[dict[str, Any]] = []
    try:
        entries = list(node_dir.glob("node*"))
        for entry in entries:
            suffix = entry.name[len("node") :]
            if not suffix.isdigit():
                continue
            cpus = parse_cpulist((entry / "cpulist").read_text())
            nodes.append({"node": int(suffix), "cpus": cpus})
    except (OSError, ConfigError):
        return []
    return sorted(nodes, key=lambda node: node["node"])


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity mask), sorted.

    Falls back to ``range(os.cpu_count())`` where the OS has no affinity call (macOS, Windows).
    """
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def git_state(cwd: str | os.PathLike[str] | None = None) -> tuple[str | None, bool | None]:
    """Return ``(revision, dirty)`` of the git repository containing ``cwd``.

    ``(None, None)`` when git is missing, ``cwd`` is not in a repository, or git takes longer
    than `GIT_TIMEOUT_S`. ``dirty`` counts modified tracked files only: listing untracked
    files can take long in big trees and rarely changes what the code does.
    """
    directory = os.getcwd() if cwd is None else os.fspath(cwd)
    # Drop variables that point git at another repository (set inside git hooks, for one):
    # the revision recorded must be the one of `cwd`. GIT_OPTIONAL_LOCKS=0 stops `git status`
    # from rewriting the index, so probing never races with a git command run meanwhile.
    env = {key: value for key, value in os.environ.items() if key not in _GIT_LOCATION_VARS}
    env["GIT_OPTIONAL_LOCKS"] = "0"

    def _git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=directory,
                env=env,
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    revision = _git("rev-parse", "HEAD")
    if revision is None or not revision.strip():
        return None, None
    status = _git("status", "--porcelain", "--untracked-files=no")
    dirty = None if status is None else bool(status.strip())
    return revision.strip(), dirty


def _bf16_native(flags: set[str] | None) -> bool:
    """Whether bf16 matrix maths runs natively on this CPU.

    The CPU flags decide when they are readable. ``torch.ops.mkldnn._is_mkldnn_bf16_supported``
    is only the fallback: it is true on any AVX512BW/VL/DQ CPU, where oneDNN *emulates* bf16
    through fp32 and bf16 training is slower than fp32, so it cannot tell native from emulated.
    """
    if flags is not None:
        return bool(flags & _NATIVE_BF16_FLAGS)
    return _mkldnn_bf16_supported()


def _mkldnn_bf16_supported() -> bool:
    """oneDNN's own answer (native or emulated), False when this torch build cannot say."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _gpus() -> list[dict[str, Any]]:
    """Visible CUDA devices; ``[]`` without CUDA, without initialising a CUDA context."""
    import torch

    # is_available() and device_count() go through NVML where possible and do not create a
    # CUDA context, so probing the environment never grabs GPU memory in the parent process.
    if not torch.cuda.is_available():
        return []
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        gpus.append(
            {
                "index": index,
                "name": props.name,
                "memory_bytes": int(props.total_memory),
                "capability": f"{props.major}.{props.minor}",
            }
        )
    return gpus


def collect_environment(
    proc_root: Path | None = None,
    sys_root: Path | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Collect the machine facts stored with every run, as a JSON-serialisable dict.

    Keys: hostname, os, python, torch_version, numpy_version, trainscale_version, cpu_model,
    cpu_vendor, logical_cores, physical_cores, usable_cores, numa_nodes, memory_total_bytes,
    memory_available_bytes, cpu_capability, cpu_flags_of_interest, bf16_native,
    mkldnn_bf16_supported, gpus, cuda_version, git_revision, git_dirty,
    torch_num_threads_default. Unknown facts are None (or empty lists), never guesses.

    ``proc_root`` and ``sys_root`` replace ``/proc`` and ``/sys`` (for tests); ``cwd`` is the
    directory whose git revision is recorded (default: the current directory).
    """
    import numpy
    import psutil
    import torch

    from trainscale import __version__

    cpuinfo = read_cpuinfo(proc_root)
    flags: set[str] | None = cpuinfo["flags"]
    memory = psutil.virtual_memory()
    revision, dirty = git_state(cwd)
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "torch_version": torch.__version__,
        "numpy_version": numpy.__version__,
        "trainscale_version": __version__,
        "cpu_model": cpuinfo["model"] or platform.processor() or None,
        "cpu_vendor": cpuinfo["vendor"],
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": usable_cores(),
        "numa_nodes": read_numa_nodes(sys_root),
        "memory_total_bytes": int(memory.total),
        "memory_available_bytes": int(memory.available),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_flags_of_interest": [flag for flag in FLAGS_OF_INTEREST if flag in (flags or ())],
        "bf16_native": _bf16_native(flags),
        "mkldnn_bf16_supported": _mkldnn_bf16_supported(),
        "gpus": _gpus(),
        "cuda_version": torch.version.cuda,
        "git_revision": revision,
        "git_dirty": dirty,
        "torch_num_threads_default": torch.get_num_threads(),
    }
