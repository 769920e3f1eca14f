"""What else used the machine while a run trained, and a verdict: quiet, busy or unknown.

Most runs share their machine (cloud VMs, CI runners, laptops). A run's speed on a busy
machine says as much about the neighbours as about the setting, so the launching process
samples the machine while its workers run and the run stores what it saw:

- `/proc/stat`: busy time of the whole machine and of each core, and the time the hypervisor
  stole (`steal`);
- psutil: the CPU time of the run's own process tree (the launching process and every
  descendant, the workers included). A process that exits is accounted for through its
  parent's `children_user` / `children_system` once reaped, so its time is never lost;
- the 1-minute load average.

Other processes' CPU time is the machine's busy time less the run's own. On the cores the
run uses (its workers' pinned cores, or every usable core when not pinned) the run's own time
is attributed per process: a process pinned inside those cores counts wholly on them, an
unpinned one in proportion to the share of its allowed cores that are the run's. Time whose
core cannot be told (the last moments of a process that exited) counts on the run's cores,
so a neighbour is never overstated.

The verdict (see `judge`) is **busy** when other processes used more than
`OTHER_CORES_LIMIT` of a core on average on the run's cores, or when the hypervisor stole
more than `STEAL_LIMIT` of those cores' time; **unknown** where `/proc/stat` cannot be read
(macOS, Windows) or the sampler failed; **quiet** otherwise. The sampler never fails a run.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from trainscale.hardware.cpulist import format_cpulist
from trainscale.hardware.facts import usable_cores

QUIET = "quiet"
BUSY = "busy"
UNKNOWN = "unknown"

OTHER_CORES_LIMIT = 0.25
"""Mean cores' worth of CPU other processes may use on the run's cores before it is busy."""
STEAL_LIMIT = 0.05
"""Fraction of the run's cores' time the hypervisor may steal before the run is busy."""
SAMPLE_PERIOD_S = 0.5
PEAK_MIN_INTERVAL_S = SAMPLE_PERIOD_S / 2
"""The shortest interval a peak is read over: /proc/stat counts in clock ticks (10 ms), so
the last interval, cut short when the sampler stops, could read several times the cores
there are."""
"""How often the background thread samples (a sample reads /proc/stat and the run's tree)."""

PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CoreTicks:
    """One `/proc/stat` cpu line, in clock ticks (USER_HZ)."""

    busy: int
    """user + nice + system + irq + softirq (guest time is inside user and nice)."""
    idle: int
    """idle + iowait."""
    steal: int
    """Time a hypervisor ran something else while this virtual CPU wanted to run."""

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.steal


def parse_proc_stat(text: str) -> dict[int | None, CoreTicks]:
    """The cpu lines of a `/proc/stat` text: key None for the whole machine, N for cpuN.

    Older kernels omit the trailing fields (steal, guest): they count as 0.
    """
    out: dict[int | None, CoreTicks] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu"):
            continue
        suffix = name[3:]
        if suffix and not suffix.isdigit():
            continue
        ticks = [int(value) for value in rest.split()] + [0] * 10
        user, nice, system, idle, iowait, irq, softirq, steal = ticks[:8]
        key = int(suffix) if suffix else None
        out[key] = CoreTicks(user + nice + system + irq + softirq, idle + iowait, steal)
    if None not in out:
        raise ValueError("no aggregate 'cpu' line in /proc/stat")
    return out


@dataclass(frozen=True)
class ProcTime:
    """One process of the run's tree at a sample."""

    own_s: float
    """Its user + system CPU seconds."""
    children_s: float
    """The CPU seconds of its children it has reaped (user + system)."""
    run_share: float
    """Share of its allowed cores that are the run's (1.0 when pinned inside them)."""


@dataclass(frozen=True)
class Sample:
    """The machine and the run's process tree at one instant."""

    t_s: float
    """Monotonic clock, seconds."""
    cores: Mapping[int | None, CoreTicks]
    """Parsed `/proc/stat` (see `parse_proc_stat`)."""
    procs: Mapping[tuple[int, float], ProcTime]
    """The run's processes, keyed by (pid, creation time) so a reused pid is a new process."""
    load_1m: float | None = None


@dataclass
class Tally:
    """Running sums over the intervals between consecutive samples (a long run keeps no
    list of samples)."""

    run_cores: tuple[int, ...]
    hz: float
    wall_s: float = 0.0
    intervals: int = 0
    machine_busy_s: float = 0.0
    run_cores_busy_s: float = 0.0
    run_cores_total_s: float = 0.0
    run_cores_steal_s: float = 0.0
    own_s: float = 0.0
    own_on_run_cores_s: float = 0.0
    other_on_run_cores_peak: float = 0.0
    per_core_busy_s: dict[int, float] = field(default_factory=dict)
    load_1m_max: float | None = None

    def add(self, before: Sample, after: Sample) -> None:
        """Fold the interval from `before` to `after` into the sums."""
        dt = after.t_s - before.t_s
        if dt <= 0:
            return
        machine = _ticks_delta(before.cores[None], after.cores[None])
        busy_run = total_run = steal_run = 0.0
        for core in self.run_cores:
            if core not in before.cores or core not in after.cores:
                continue
            delta = _ticks_delta(before.cores[core], after.cores[core])
            busy_run += delta.busy / self.hz
            total_run += delta.total / self.hz
            steal_run += delta.steal / self.hz
            self.per_core_busy_s[core] = self.per_core_busy_s.get(core, 0.0) + delta.busy / self.hz
        own, own_run = _own_delta(before.procs, after.procs)
        self.wall_s += dt
        self.intervals += 1
        self.machine_busy_s += machine.busy / self.hz
        self.run_cores_busy_s += busy_run
        self.run_cores_total_s += total_run
        self.run_cores_steal_s += steal_run
        self.own_s += own
        self.own_on_run_cores_s += own_run
        other_all = max(0.0, machine.busy / self.hz - own)
        other_run = min(max(0.0, busy_run - own_run), other_all)
        if dt >= PEAK_MIN_INTERVAL_S:
            self.other_on_run_cores_peak = max(self.other_on_run_cores_peak, other_run / dt)
        for load in (before.load_1m, after.load_1m):
            if load is not None:
                self.load_1m_max = load if self.load_1m_max is None else max(self.load_1m_max, load)


def _ticks_delta(before: CoreTicks, after: CoreTicks) -> CoreTicks:
    # A counter never goes back; a CPU brought offline and online again may restart its line.
    return CoreTicks(
        max(0, after.busy - before.busy),
        max(0, after.idle - before.idle),
        max(0, after.steal - before.steal),
    )


def _own_delta(
    before: Mapping[tuple[int, float], ProcTime], after: Mapping[tuple[int, float], ProcTime]
) -> tuple[float, float]:
    """(CPU seconds the run's tree used in the interval, the part of it on the run's cores)."""
    total_before = sum(p.own_s + p.children_s for p in before.values())
    total_after = sum(p.own_s + p.children_s for p in after.values())
    # Processes that exited moved their time into a parent's children fields once reaped,
    # so the tree's total stays whole; it only drops when a process left the tree unreaped.
    total = max(0.0, total_after - total_before)
    placed = placed_run = 0.0
    for key, now in after.items():
        then = before.get(key)
        used = now.own_s - then.own_s if then is not None else now.own_s
        used = max(0.0, used)
        placed += used
        placed_run += used * now.run_share
    # The rest (reaped children's last moments) ran somewhere unknown: count it on the run's
    # cores, which can only understate the neighbours.
    return total, placed_run + max(0.0, total - placed)


@dataclass(frozen=True, kw_only=True)
class Contention:
    """What else used the machine while a run trained, and the verdict on it."""

    verdict: str
    """'quiet', 'busy' or 'unknown'."""
    reason: str
    """One line: why this verdict (the figure that decided it, or why nothing was measured)."""
    other_cores_busy: float | None = None
    """Mean cores' worth of CPU used by other processes anywhere on the machine."""
    other_cores_busy_run_cores: float | None = None
    """Mean cores' worth of CPU used by other processes on the run's cores (the verdict's)."""
    other_cores_busy_run_cores_peak: float | None = None
    """The largest of that figure over one sampling interval."""
    steal_fraction: float | None = None
    """Share of the run's cores' time the hypervisor stole."""
    load_avg_max: float | None = None
    """Highest 1-minute load average seen (the run's own workers included)."""
    run_cores: list[int] | None = None
    """The cores the run used (its workers' pinned cores, or every usable core)."""
    run_cores_busy: dict[str, float] | None = None
    """Each run core's busy fraction over the run, the run's own work included."""
    own_cores_busy: float | None = None
    """Mean cores' worth of CPU the run's own processes used."""
    wall_s: float | None = None
    """Seconds sampled (from launching the workers until they had all exited)."""
    num_samples: int = 0
    other_cores_limit: float = OTHER_CORES_LIMIT
    steal_limit: float = STEAL_LIMIT

    @classmethod
    def unknown(cls, reason: str) -> Contention:
        """No verdict: `reason` says why nothing (or not enough) was measured."""
        return cls(verdict=UNKNOWN, reason=reason)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> Contention | None:
        """The contention a stored summary holds; None for a run stored without one."""
        stored = summary.get("contention")
        if not isinstance(stored, Mapping) or "verdict" not in stored:
            return None
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{key: value for key, value in stored.items() if key in known})

    def summary(self) -> dict[str, Any]:
        """The run summary's key for these figures."""
        return {"contention": self.to_dict()}

    def figures(self) -> str:
        """The measured figures in a few words ('' when nothing was measured)."""
        if self.other_cores_busy_run_cores is None:
            return ""
        text = (
            f"other processes {self.other_cores_busy_run_cores:.2f} cores on the run's cores, "
            f"{self.other_cores_busy or 0.0:.2f} machine-wide; steal {self.steal_fraction or 0:.1%}"
        )
        if self.load_avg_max is not None:
            text += f"; load average up to {self.load_avg_max:.2f}"
        return text


def _peak(tally: Tally, mean: float) -> float:
    """The busiest interval's other cores on the run's cores: at least their `mean` (all a
    run too short for a full interval has), never more cores than the run has."""
    return min(max(tally.other_on_run_cores_peak, mean), len(tally.run_cores))


def judge(tally: Tally, num_samples: int) -> Contention:
    """The verdict on a run from its folded samples (pure)."""
    if tally.intervals == 0 or tally.wall_s <= 0:
        return Contention.unknown("the run ended before the machine could be sampled twice")
    wall = tally.wall_s
    other_all = max(0.0, tally.machine_busy_s - tally.own_s) / wall
    other_run = min(max(0.0, tally.run_cores_busy_s - tally.own_on_run_cores_s) / wall, other_all)
    steal = tally.run_cores_steal_s / tally.run_cores_total_s if tally.run_cores_total_s else 0.0
    cores = _format_cores(tally.run_cores)
    if other_run > OTHER_CORES_LIMIT:
        verdict = BUSY
        reason = (
            f"other processes used {other_run:.2f} cores on average on the run's cores "
            f"{cores} (more than {OTHER_CORES_LIMIT})"
        )
    elif steal > STEAL_LIMIT:
        verdict = BUSY
        reason = (
            f"the hypervisor stole {steal:.1%} of the run's cores' time "
            f"(more than {STEAL_LIMIT:.0%})"
        )
    else:
        verdict = QUIET
        reason = (
            f"other processes used {other_run:.2f} cores on average on the run's cores "
            f"{cores}; steal {steal:.1%}"
        )
    return Contention(
        verdict=verdict,
        reason=reason,
        other_cores_busy=round(other_all, 4),
        other_cores_busy_run_cores=round(other_run, 4),
        other_cores_busy_run_cores_peak=round(_peak(tally, other_run), 4),
        steal_fraction=round(steal, 4),
        load_avg_max=tally.load_1m_max,
        run_cores=list(tally.run_cores),
        run_cores_busy={
            str(core): round(busy / wall, 4) for core, busy in sorted(tally.per_core_busy_s.items())
        },
        own_cores_busy=round(tally.own_s / wall, 4),
        wall_s=round(wall, 3),
        num_samples=num_samples,
    )


def _format_cores(cores: Collection[int]) -> str:
    return f"[{format_cpulist(sorted(cores))}]"


class ContentionSampler:
    """Samples the machine and this process's tree from `start()` until `stop()`.

    Started by the process that launches a run's workers, so the tree is the whole run. Every
    failure inside is caught: `stop()` then returns an 'unknown' verdict saying why.
    """

    def __init__(
        self,
        run_cores: Collection[int] | None = None,
        *,
        period_s: float = SAMPLE_PERIOD_S,
        proc_stat: Path = PROC_STAT,
    ) -> None:
        self._run_cores = tuple(sorted(run_cores)) if run_cores else None
        self._period_s = period_s
        self._proc_stat = proc_stat
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._tally: Tally | None = None
        self._last: Sample | None = None
        self._samples = 0
        self._failure: str | None = None

    def start(self) -> ContentionSampler:
        """Take the first sample and start the background thread; never raises."""
        try:
            if not self._proc_stat.exists():
                self._failure = (
                    f"{self._proc_stat} is not readable on this system: other processes' CPU "
                    "use was not sampled"
                )
                return self
            self._psutil = psutil
            self._root = psutil.Process()
            cores = self._run_cores or tuple(usable_cores())
            self._tally = Tally(run_cores=cores, hz=float(os.sysconf("SC_CLK_TCK")))
            self._last = self._sample()
            self._samples = 1
            self._thread = threading.Thread(
                target=self._loop, name="trainscale-contention", daemon=True
            )
            self._thread.start()
        except Exception as error:  # never fail a run for want of its neighbours' figures
            self._fail(error)
        return self

    def stop(self) -> Contention:
        """Take the last sample, stop the thread and return the verdict; never raises."""
        try:
            self._stop.set()
            if self._thread is not None:
                self._thread.join(timeout=5.0)
            if self._failure is None and self._tally is not None:
                self._step()
            if self._failure is not None:
                return Contention.unknown(self._failure)
            if self._tally is None:
                return Contention.unknown("the contention sampler did not start")
            return judge(self._tally, self._samples)
        except Exception as error:
            self._fail(error)
            return Contention.unknown(self._failure or "the contention sampler failed")

    def _loop(self) -> None:
        while not self._stop.wait(self._period_s):
            if self._failure is not None:
                return
            self._step()

    def _step(self) -> None:
        try:
            with self._lock:
                sample = self._sample()
                assert self._tally is not None and self._last is not None
                self._tally.add(self._last, sample)
                self._last = sample
                self._samples += 1
        except Exception as error:
            self._fail(error)

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = f"the contention sampler failed: {type(error).__name__}: {error}"

    def _sample(self) -> Sample:
        """One sample: /proc/stat, the run's tree, the load average (a few milliseconds)."""
        psutil = self._psutil
        assert self._tally is not None
        run_cores = set(self._tally.run_cores)
        cores = parse_proc_stat(self._proc_stat.read_text())
        procs: dict[tuple[int, float], ProcTime] = {}
        for proc in [self._root, *self._root.children(recursive=True)]:
            # A process may exit between the listing and the reading: its time reaches its
            # parent's children fields once reaped.
            with contextlib.suppress(psutil.Error):
                with proc.oneshot():
                    times = proc.cpu_times()
                    key = (proc.pid, proc.create_time())
                allowed = _allowed_cores(proc, psutil)
                share = len(allowed & run_cores) / len(allowed) if allowed else 1.0
                procs[key] = ProcTime(
                    own_s=times.user + times.system,
                    children_s=times.children_user + times.children_system,
                    run_share=share,
                )
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        return Sample(t_s=time.monotonic(), cores=cores, procs=procs, load_1m=load)


def _allowed_cores(proc: Any, psutil: Any) -> set[int]:
    try:
        return set(proc.cpu_affinity())
    except (AttributeError, psutil.Error):  # no affinity call here: count it on the run
        return set()


@dataclass(frozen=True)
class OtherProcess:
    """A process outside the run's tree, and the CPU it used over a short interval."""

    pid: int
    name: str
    cpu_percent: float
    """Percent of one core (200 is two cores' worth)."""

    def text(self) -> str:
        """'stress (pid 4242) 98% CPU'."""
        return f"{self.name} (pid {self.pid}) {self.cpu_percent:.0f}% CPU"


BUSIEST_MIN_PERCENT = 5.0
"""Processes using less than this share of one core are not named as neighbours."""


def rank_processes(
    before: Mapping[tuple[int, float], tuple[str, float]],
    after: Mapping[tuple[int, float], tuple[str, float]],
    interval_s: float,
    *,
    exclude: Collection[int] = (),
    limit: int = 3,
    min_percent: float = BUSIEST_MIN_PERCENT,
) -> list[OtherProcess]:
    """The busiest processes between two readings, each {(pid, creation time): (name, CPU
    seconds)}, most CPU first; `exclude` the pids of this process's tree. Pure."""
    if interval_s <= 0:
        return []
    found = []
    for key, (name, cpu_s) in after.items():
        if key[0] in exclude or key not in before:
            continue
        percent = 100.0 * max(0.0, cpu_s - before[key][1]) / interval_s
        if percent >= min_percent:
            found.append(OtherProcess(pid=key[0], name=name, cpu_percent=round(percent, 1)))
    found.sort(key=lambda p: (-p.cpu_percent, p.pid))
    return found[:limit]


def busiest_processes(interval_s: float = 0.5, limit: int = 3) -> list[OtherProcess]:
    """The processes outside this process's tree that used the most CPU over `interval_s`
    (psutil, two readings); [] where they cannot be read. Never raises: naming the
    neighbours is a courtesy, never a reason to fail."""
    try:
        me = psutil.Process()
        exclude = {me.pid, *(child.pid for child in me.children(recursive=True))}

        def reading() -> dict[tuple[int, float], tuple[str, float]]:
            out: dict[tuple[int, float], tuple[str, float]] = {}
            for proc in psutil.process_iter(["name", "cpu_times", "create_time"]):
                info = proc.info
                times = info.get("cpu_times")
                if times is None or info.get("create_time") is None:
                    continue
                key = (proc.pid, float(info["create_time"]))
                out[key] = (str(info.get("name") or "?"), times.user + times.system)
            return out

        first, started = reading(), time.monotonic()
        time.sleep(interval_s)
        second = reading()
        return rank_processes(
            first, second, time.monotonic() - started, exclude=exclude, limit=limit
        )
    except Exception:  # noqa: BLE001 - a courtesy, never a failure
        return []
