"""Facts about the machine a run executes on.

Every stored result carries these facts (CPU model, cores, NUMA layout, bf16 support, GPUs,
library versions, git revision) because a speedup figure means nothing without the hardware
that produced it; the CPU peak (`hardware.peaks`) starts from the same /proc/cpuinfo reading.
Nothing here runs at import time: torch is imported inside the functions, so `trainscale
--help` and the affinity planner (which needs `usable_cores`) stay cheap.

The /proc and /sys roots are module-level defaults and function parameters so that tests can
point them at fake files.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy
import psutil

from trainscale import __version__
from trainscale.errors import ConfigError
from trainscale.hardware import start_affinity
from trainscale.hardware.cpu_quota import cpu_quota
from trainscale.hardware.cpulist import parse_cpulist

PROC_ROOT = Path("/proc")
"""Default root of the proc filesystem (tests pass their own)."""

SYS_ROOT = Path("/sys")
"""Default root of the sysfs filesystem (tests pass their own)."""

FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
"""x86 CPU flags that decide how fast fp32 and bf16 training runs on the CPU."""

# Flags that mean bf16 matrix maths runs in hardware. aarch64 reports "bf16" in its
# Features line (e.g. Graviton3, Neoverse V1/N2).
_NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})

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


@dataclass(frozen=True)
class CpuInfo:
    """The first processor's entry of /proc/cpuinfo (the others repeat it)."""

    model_name: str | None = None
    vendor: str | None = None
    """``vendor_id`` on x86; on aarch64 the ``CPU implementer`` code (0x41 = Arm)."""
    family: int | None = None
    model: int | None = None
    """The model number (x86 ``model``), not its name."""
    flags: frozenset[str] | None = None
    """x86 ``flags`` or aarch64 ``Features``; None when unknown (so callers can tell "no
    AVX2" from "cannot say")."""
    mhz: float | None = None
    """The ``cpu MHz`` line: the current clock (in a VM usually the nominal one)."""


def _int_or_none(text: str) -> int | None:
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def read_cpuinfo(proc_root: Path | None = None) -> CpuInfo:
    """Read ``<proc_root>/cpuinfo`` (first processor only); every field None when unreadable.

    The one reader of that file: the environment stored with each run and the CPU peak both
    start from it.
    """
    root = PROC_ROOT if proc_root is None else Path(proc_root)
    try:
        text = (root / "cpuinfo").read_text(errors="replace")
    except OSError:
        return CpuInfo()
    found: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if "flags" in found:
                break  # a blank line ends the first processor; the rest repeat it
            continue
        key, value = key.strip(), value.strip()
        if key == "model name":
            found.setdefault("model_name", value)
        elif key in ("vendor_id", "CPU implementer"):
            found.setdefault("vendor", value)
        elif key == "cpu family":
            found.setdefault("family", _int_or_none(value))
        elif key == "model":
            found.setdefault("model", _int_or_none(value))
        elif key in ("flags", "Features"):
            found.setdefault("flags", frozenset(value.split()))
        elif key == "cpu MHz":
            found.setdefault("mhz", _float_or_none(value))
    return CpuInfo(**found)


NOMINAL_CLOCK = "cpuinfo MHz"
"""The clock's source where no maximum is visible (a VM, or no cpufreq): the "cpu MHz" of
/proc/cpuinfo, the clock the kernel reports, often the nominal one; cores that boost run
faster, so a peak from it can be beaten."""


@dataclass(frozen=True)
class CpuFacts:
    """What the theoretical CPU peak is computed from (`hardware.peaks.cpu_peak`)."""

    model_name: str | None
    vendor: str | None
    family: int | None
    model: int | None
    flags: frozenset[str] = field(default_factory=frozenset)
    max_frequency_hz: float | None = None
    frequency_source: str | None = None
    """Where the clock came from: 'psutil max', 'cpufreq max' or `NOMINAL_CLOCK`."""
    physical_cores: int | None = None
    logical_cores: int | None = None


def read_cpu_facts(proc_root: Path | None = None, sys_root: Path | None = None) -> CpuFacts:
    """The CPU facts the peak needs: `read_cpuinfo`, the highest clock, the core counts.

    The clock is the first available of: psutil's maximum frequency, cpufreq's
    ``cpuinfo_max_freq``, then the first processor's "cpu MHz". psutil (and the core counts)
    are only asked when the roots are the real ones, so fake trees give fake facts only.
    """
    info = read_cpuinfo(proc_root)
    sysfs = SYS_ROOT if sys_root is None else Path(sys_root)
    frequency_hz, source = None, None
    if proc_root is None and sys_root is None:
        try:
            freq = psutil.cpu_freq()
            if freq is not None and freq.max and freq.max > 0:
                frequency_hz, source = freq.max * 1e6, "psutil max"
        except (OSError, RuntimeError, NotImplementedError):
            pass
    if frequency_hz is None:
        try:
            khz = int((sysfs / "devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text())
            if khz > 0:
                frequency_hz, source = khz * 1e3, "cpufreq max"
        except (OSError, ValueError):
            pass
    if frequency_hz is None and info.mhz:
        frequency_hz, source = info.mhz * 1e6, NOMINAL_CLOCK

    physical = psutil.cpu_count(logical=False) if proc_root is None else None
    return CpuFacts(
        model_name=info.model_name,
        vendor=info.vendor,
        family=info.family,
        model=info.model,
        flags=info.flags or frozenset(),
        max_frequency_hz=frequency_hz,
        frequency_source=source,
        physical_cores=physical,
        logical_cores=os.cpu_count() if proc_root is None else None,
    )


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
    The mask as it was before torch's OpenMP runtime narrowed it, where an OpenMP binding
    variable made it (`start_affinity`); under a cgroup CPU quota of q cores' time, its first
    max(1, floor(q)) cores (`cpu_quota`: the mask would promise cores the quota does not pay
    for).
    """
    if hasattr(os, "sched_getaffinity"):
        start = start_affinity.narrowed_by_openmp()
        cores = sorted(start if start is not None else os.sched_getaffinity(0))
    else:
        cores = list(range(os.cpu_count() or 1))
    quota = cpu_quota()
    if quota is not None and quota < len(cores):
        cores = cores[: max(1, int(quota))]
    return cores


def physical_cores_among(cpus: Iterable[int], sysfs: Path = Path("/sys")) -> int:
    """How many physical cores the logical CPUs `cpus` belong to: two hyperthreads of one
    core share its units, so they count once (Linux's `topology/core_cpus_list`, or
    `thread_siblings_list` on older kernels). Where the topology cannot be read, every CPU
    counts as a core."""
    wanted = set(cpus)
    groups: set[frozenset[int]] = set()
    for cpu in wanted:
        topology = sysfs / f"devices/system/cpu/cpu{cpu}/topology"
        for name in ("core_cpus_list", "thread_siblings_list"):
            try:
                groups.add(frozenset(parse_cpulist((topology / name).read_text())))
                break
            except (OSError, ConfigError):
                continue
        else:
            return len(wanted)
    return len(groups)


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


def _bf16_native(flags: frozenset[str] | None) -> bool:
    """Whether bf16 matrix maths runs natively on this CPU.

    The CPU flags decide when they are readable. ``torch.ops.mkldnn._is_mkldnn_bf16_supported``
    is only the fallback: it is true on any AVX512BW/VL/DQ CPU, where oneDNN *emulates* bf16
    through fp32 and bf16 training is slower than fp32, so it cannot tell native from emulated.
    """
    if flags is not None:
        return bool(flags & _NATIVE_BF16_FLAGS)
    return _mkldnn_bf16_supported()


def cpu_bf16_native(proc_root: Path | None = None) -> bool:
    """Whether this CPU computes bf16 natively (its flags, read from cpuinfo)."""
    return _bf16_native(read_cpuinfo(proc_root).flags)


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


@dataclass(frozen=True)
class Environment:
    """The machine facts stored with every run: a speedup means nothing without the
    hardware and the libraries that produced it. Unknown facts are None (or empty), never
    guesses."""

    hostname: str | None = None
    os: str | None = None
    python: str | None = None
    torch_version: str | None = None
    numpy_version: str | None = None
    trainscale_version: str | None = None
    cpu_model: str | None = None
    cpu_vendor: str | None = None
    logical_cores: int | None = None
    physical_cores: int | None = None
    usable_cores: list[int] = field(default_factory=list)
    """The cores this process may run on (its affinity mask, cut to a cgroup CPU quota)."""
    cpu_quota: float | None = None
    """The cores' worth of CPU time this process's cgroup allows; None: no quota."""
    numa_nodes: list[dict[str, Any]] = field(default_factory=list)
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    cpu_capability: str | None = None
    """torch's CPU kernel level (e.g. AVX2, AVX512)."""
    cpu_flags_of_interest: list[str] = field(default_factory=list)
    bf16_native: bool | None = None
    """Whether the CPU computes bf16 matrix products in hardware (AMX, AVX512-BF16)."""
    mkldnn_bf16_supported: bool | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    cuda_version: str | None = None
    git_revision: str | None = None
    git_dirty: bool | None = None
    torch_num_threads_default: int | None = None
    """torch's own intra-op thread count here (what a run that sets none gets)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-serialisable form stored with a run."""
        return asdict(self)


def machine_environment(
    proc_root: Path | None = None,
    sys_root: Path | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Environment:
    """This machine's facts, now.

    ``proc_root`` and ``sys_root`` replace ``/proc`` and ``/sys`` (for tests); ``cwd`` is the
    directory whose git revision is recorded (default: the current directory).
    """
    import torch

    cpuinfo = read_cpuinfo(proc_root)
    flags = cpuinfo.flags
    memory = psutil.virtual_memory()
    revision, dirty = git_state(cwd)
    return Environment(
        hostname=socket.gethostname(),
        os=platform.platform(),
        python=sys.version.split()[0],
        torch_version=torch.__version__,
        numpy_version=numpy.__version__,
        trainscale_version=__version__,
        cpu_model=cpuinfo.model_name or platform.processor() or None,
        cpu_vendor=cpuinfo.vendor,
        logical_cores=os.cpu_count(),
        physical_cores=psutil.cpu_count(logical=False),
        usable_cores=usable_cores(),
        cpu_quota=cpu_quota(),
        numa_nodes=read_numa_nodes(sys_root),
        memory_total_bytes=int(memory.total),
        memory_available_bytes=int(memory.available),
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        cpu_flags_of_interest=[flag for flag in FLAGS_OF_INTEREST if flag in (flags or ())],
        bf16_native=_bf16_native(flags),
        mkldnn_bf16_supported=_mkldnn_bf16_supported(),
        gpus=_gpus(),
        cuda_version=torch.version.cuda,
        git_revision=revision,
        git_dirty=dirty,
        torch_num_threads_default=torch.get_num_threads(),
    )


def collect_environment(
    proc_root: Path | None = None,
    sys_root: Path | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """`machine_environment()` as the dict stored with a run and shown by `trainscale env`:
    every field of `Environment`."""
    return machine_environment(proc_root, sys_root, cwd).to_dict()


def gpus_text(env: dict[str, Any]) -> str:
    """', 1 GPU (NVIDIA H100 80GB HBM3)' for the machine line; '' without GPUs."""
    gpus = env.get("gpus") or []
    if not gpus:
        return ""
    names = ", ".join(dict.fromkeys(str(gpu.get("name")) for gpu in gpus))
    return f", {len(gpus)} GPU{'s' if len(gpus) > 1 else ''} ({names})"
