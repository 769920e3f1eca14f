"""Energy of a run: CPU package energy from RAPL, GPU energy from NVML.

Both are cumulative hardware counters read at the start and at the end of the measured
interval; the energy is the difference. What they count:

- **RAPL** (``/sys/class/powercap/intel-rapl:N``, one directory per CPU package, AMD Zen
  included): the whole package (cores, caches, uncore), whatever runs on it, idle power
  included. The counter ``energy_uj`` wraps to 0 after ``max_energy_range_uj`` (a few
  hundred kJ: minutes at full load), so a background thread samples it every
  `RAPL_POLL_S` seconds and sums the steps, each corrected for at most one wrap. Since the
  2020 fix for CVE-2020-8694 most kernels let only root read ``energy_uj``; an unreadable
  file means "not measured".
- **NVML** (``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver loaded,
  Volta and later): the whole GPU board. Needs the ``nvidia-ml-py`` package (module
  ``pynvml``), imported only when a GPU run asks for it.

A figure that cannot be measured is None with a reason, never 0. One process per node (local
rank 0) reads its node, so every package and GPU is counted once; the nodes' figures are
summed. The sysfs root and the NVML module are parameters so tests can pass fakes.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POWERCAP_ROOT = Path("/sys/class/powercap")
"""Default root of the powercap class (tests pass their own)."""

RAPL_POLL_S = 10.0
"""How often the RAPL counters are read during a run: far shorter than a wrap (minutes)."""

# Top-level RAPL zones only ("intel-rapl:0"); "intel-rapl:0:0" are its sub-zones (core, dram)
# and would count the same joules twice.
_PACKAGE_ZONE = re.compile(r"intel-rapl:\d+")
# torch prints a CUDA device's UUID as 8-4-4-4-12 hex digits; NVML names it "GPU-" + that.
_UUID = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", re.IGNORECASE)


@dataclass(frozen=True)
class RaplDomain:
    """One RAPL package zone."""

    name: str
    """The zone's own name, e.g. 'package-0'."""
    path: Path
    max_energy_range_uj: int


def counter_delta(start: int, end: int, wrap_range: int) -> int:
    """Increase of a counter that wraps to 0 after `wrap_range`, assuming at most one wrap."""
    if end >= start:
        return end - start
    return end + wrap_range - start


def find_rapl_packages(root: Path | None = None) -> tuple[list[RaplDomain], str | None]:
    """The readable RAPL package zones under `root`, or ([], why none can be read).

    A package whose ``energy_uj`` cannot be read (permissions) makes the whole CPU figure
    unmeasurable: summing only some packages would under-count.
    """
    base = POWERCAP_ROOT if root is None else Path(root)
    if not base.is_dir():
        return [], f"{base} does not exist (no RAPL on this machine or kernel)"
    domains: list[RaplDomain] = []
    for zone in sorted(base.iterdir(), key=lambda p: p.name):
        if not _PACKAGE_ZONE.fullmatch(zone.name):
            continue
        try:
            name = (zone / "name").read_text().strip()
        except OSError:
            continue
        if not name.startswith("package"):
            continue  # "psys" (whole platform) and others are not a CPU package
        try:
            wrap = int((zone / "max_energy_range_uj").read_text())
            int((zone / "energy_uj").read_text())
        except PermissionError:
            return [], (
                f"{zone / 'energy_uj'} is not readable (since the 2020 fix for CVE-2020-8694 "
                "most kernels let only root read RAPL)"
            )
        except (OSError, ValueError) as error:
            return [], f"cannot read {zone}: {error}"
        domains.append(RaplDomain(name=name, path=zone, max_energy_range_uj=wrap))
    if not domains:
        return [], f"no RAPL package zone under {base}"
    return domains, None


class RaplCounter:
    """Sums the energy of RAPL package zones between `start()` and `stop()`, wraps included."""

    def __init__(self, domains: Sequence[RaplDomain]) -> None:
        self.domains = list(domains)
        self._last: list[int] = []
        self._total_uj: list[int] = [0] * len(self.domains)
        self._lock = threading.Lock()
        self.error: str | None = None

    def _read(self) -> list[int]:
        return [int((d.path / "energy_uj").read_text()) for d in self.domains]

    def start(self) -> None:
        """Take the first reading."""
        self._last = self._read()

    def sample(self) -> None:
        """Add the increase since the last reading (call more often than the counter wraps)."""
        with self._lock:
            if self.error is not None:
                return
            try:
                now = self._read()
            except (OSError, ValueError) as error:
                self.error = f"RAPL read failed during the run: {error}"
                return
            for index, (domain, before, after) in enumerate(
                zip(self.domains, self._last, now, strict=True)
            ):
                self._total_uj[index] += counter_delta(before, after, domain.max_energy_range_uj)
            self._last = now

    def joules(self) -> float | None:
        """Energy of all packages so far, or None if a reading failed."""
        if self.error is not None:
            return None
        return sum(self._total_uj) / 1e6


def load_nvml() -> Any | None:
    """The `pynvml` module of nvidia-ml-py, or None where it is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


class NvmlCounter:
    """GPU energy between `start()` and `stop()` from NVML's total-energy counter (mJ).

    `gpus` names the GPUs by NVML index (int) or UUID (str, "GPU-..."). Any NVML failure
    (no driver, a GPU older than Volta without the counter) leaves the figure unmeasured.
    """

    def __init__(self, nvml: Any, gpus: Sequence[int | str]) -> None:
        self.nvml = nvml
        self.gpus = list(gpus)
        self._handles: list[Any] = []
        self._start_mj: list[int] = []
        self.error: str | None = None
        self.names: list[str] = []

    def _handle(self, gpu: int | str) -> Any:
        if isinstance(gpu, str):
            return self.nvml.nvmlDeviceGetHandleByUUID(gpu)
        return self.nvml.nvmlDeviceGetHandleByIndex(gpu)

    def _read(self) -> list[int]:
        return [int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self._handles]

    def start(self) -> bool:
        """Initialise NVML and take the first reading; False (with `error`) if it cannot."""
        if not self.gpus:
            self.error = "no GPU to measure"
            return False
        try:
            self.nvml.nvmlInit()
        except Exception as error:  # NVMLError and friends: the driver's answer, not a bug
            self.error = f"NVML unavailable: {error}"
            return False
        try:
            self._handles = [self._handle(gpu) for gpu in self.gpus]
            self._start_mj = self._read()
        except Exception as error:
            self.error = f"NVML energy counter unavailable: {error}"
            self._shutdown()
            return False
        self.names = [f"nvml:{gpu}" for gpu in self.gpus]
        return True

    def stop(self) -> float | None:
        """Energy of the GPUs since `start()` in joules, or None if it could not be read."""
        if self.error is not None:
            return None
        try:
            end = self._read()
        except Exception as error:
            self.error = f"NVML read failed: {error}"
            return None
        finally:
            self._shutdown()
        return sum(after - before for before, after in zip(self._start_mj, end, strict=True)) / 1e3

    def _shutdown(self) -> None:
        # Shutting down a half-initialised NVML must not fail a run.
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()


class EnergyMeter:
    """One node's CPU package and GPU energy over an interval: `start()`, then `stop()`.

    `gpus` is None for a CPU run (its GPUs are not part of it) or the GPUs the node's
    workers use. `poll_s` None disables the background sampler (tests call `sample()`).
    """

    def __init__(
        self,
        *,
        powercap_root: Path | None = None,
        nvml: Any | None = None,
        gpus: Sequence[int | str] | None = None,
        poll_s: float | None = RAPL_POLL_S,
    ) -> None:
        self.powercap_root = powercap_root
        self.nvml = nvml
        self.gpus = None if gpus is None else list(gpus)
        self.poll_s = poll_s
        self._rapl: RaplCounter | None = None
        self._nvml: NvmlCounter | None = None
        self._why: dict[str, str] = {}
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self) -> EnergyMeter:
        """Read every counter that can be read; remember why the others cannot."""
        domains, why = find_rapl_packages(self.powercap_root)
        if domains:
            self._rapl = RaplCounter(domains)
            try:
                self._rapl.start()
            except (OSError, ValueError) as error:
                self._rapl, why = None, f"cannot read RAPL: {error}"
        if self._rapl is None:
            self._why["cpu_package"] = why or "RAPL unavailable"
        if self.gpus is None:
            self._why["gpu"] = "not a GPU run"
        elif self.nvml is None:
            self._why["gpu"] = "nvidia-ml-py is not installed (pip install 'trainscale[gpu]')"
        else:
            self._nvml = NvmlCounter(self.nvml, self.gpus)
            if not self._nvml.start():
                self._why["gpu"] = self._nvml.error or "NVML unavailable"
                self._nvml = None
        self._t0 = time.perf_counter()
        if self._rapl is not None and self.poll_s:
            self._thread = threading.Thread(target=self._poll, name="rapl-sampler", daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop_event.wait(self.poll_s):
            if self._rapl is not None:
                self._rapl.sample()

    def sample(self) -> None:
        """Read the RAPL counters now (the background thread does this every `poll_s`)."""
        if self._rapl is not None:
            self._rapl.sample()

    def stop(self) -> dict[str, Any]:
        """The node's energy since `start()`: see `node_energy` for the keys."""
        interval_s = time.perf_counter() - self._t0
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join()
        cpu_j = gpu_j = None
        measured: list[str] = []
        if self._rapl is not None:
            self._rapl.sample()
            cpu_j = self._rapl.joules()
            if cpu_j is None:
                self._why["cpu_package"] = self._rapl.error or "RAPL read failed"
            else:
                measured += [f"rapl:{d.name}" for d in self._rapl.domains]
        if self._nvml is not None:
            gpu_j = self._nvml.stop()
            if gpu_j is None:
                self._why["gpu"] = self._nvml.error or "NVML read failed"
            else:
                measured += self._nvml.names
        return node_energy(cpu_j, gpu_j, measured, self._why, interval_s)


def node_energy(
    cpu_package_j: float | None,
    gpu_j: float | None,
    measured: Sequence[str],
    unmeasured: dict[str, str],
    interval_s: float,
) -> dict[str, Any]:
    """One node's reading: joules per source (None = not measured), what was read, why not."""
    return {
        "cpu_package_j": cpu_package_j,
        "gpu_j": gpu_j,
        "measured": list(measured),
        "unmeasured": dict(unmeasured),
        "interval_s": interval_s,
    }


def combine_nodes(readings: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The run's energy: the nodes' readings summed (ranks that did not read pass None).

    A source any node could not measure is None for the run: a partial sum would read as a
    smaller energy, not as a missing one.
    """
    nodes = [r for r in readings if r is not None]
    if not nodes:
        return None
    total: dict[str, Any] = {"measured": [], "unmeasured": {}, "nodes": len(nodes)}
    for key in ("cpu_package_j", "gpu_j"):
        values = [node.get(key) for node in nodes]
        numbers = [v for v in values if v is not None]
        total[key] = float(sum(numbers)) if len(numbers) == len(values) else None
    for index, node in enumerate(nodes):
        prefix = f"node{index}:" if len(nodes) > 1 else ""
        total["measured"] += [prefix + name for name in node.get("measured", [])]
        for source, why in node.get("unmeasured", {}).items():
            total["unmeasured"].setdefault(source, prefix + why)
    total["interval_s"] = max(float(node.get("interval_s") or 0.0) for node in nodes)
    return total


def cuda_gpu_ids(local_devices: int) -> list[int | str]:
    """NVML names of the first `local_devices` CUDA devices: their UUIDs where torch has them.

    CUDA's device order (and CUDA_VISIBLE_DEVICES) can differ from NVML's, so the UUID is the
    reliable link; the CUDA index is the fallback.
    """
    import torch

    ids: list[int | str] = []
    for index in range(local_devices):
        uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", ""))
        ids.append(f"GPU-{uuid}" if _UUID.fullmatch(uuid) else index)
    return ids


def start_node_meter(device_type: str, local_rank: int, local_devices: int) -> EnergyMeter | None:
    """Start this node's meter in its local rank 0 (every other rank gets None)."""
    if local_rank != 0:
        return None
    gpus = cuda_gpu_ids(local_devices) if device_type == "cuda" else None
    nvml = load_nvml() if gpus is not None else None
    return EnergyMeter(nvml=nvml, gpus=gpus).start()


def energy_sources(
    powercap_root: Path | None = None, nvml: Any | None = None, gpus: Sequence[int | str] = ()
) -> dict[str, str]:
    """Whether each source can be read on this machine: {'cpu_package': ..., 'gpu': ...}."""
    domains, why = find_rapl_packages(powercap_root)
    cpu = (
        "readable: RAPL " + ", ".join(d.name for d in domains)
        if domains
        else f"not measurable: {why}"
    )
    if not gpus:
        gpu = "no GPU"
    elif nvml is None:
        gpu = "not measurable: nvidia-ml-py is not installed (pip install 'trainscale[gpu]')"
    else:
        counter = NvmlCounter(nvml, gpus)
        gpu = (
            f"readable: NVML energy counter on {len(gpus)} GPU(s)"
            if counter.start() and counter.stop() is not None
            else f"not measurable: {counter.error}"
        )
    return {"cpu_package": cpu, "gpu": gpu}
