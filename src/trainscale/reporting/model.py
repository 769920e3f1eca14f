"""The figures a report holds: plain frozen dataclasses, filled by `aggregate`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainscale.metrics.scaling import AmdahlFit, relative_iqr
from trainscale.results.stored_settings import StoredSettings


@dataclass(frozen=True)
class NotCompleted:
    """A run that did not complete: listed in the report with its reason."""

    run_id: str
    label: str
    workload: str | None
    status: str
    reason: str
    retried: bool = False
    """A later attempt of the same configuration and repeat completed (sweep resumed)."""


@dataclass(frozen=True)
class Configuration:
    """One configuration's figures, medians over its completed runs."""

    key: str
    """The resolved-config hash shared by its runs."""
    label: str
    workload: str
    data_kind: str | None
    workers: int
    threads_per_worker: int | None
    """Intra-op threads per worker as the runs ran (torch's default resolved)."""
    threads_setting: str
    """What was asked: a number, or 'torch-default'."""
    affinity: str | None
    pinned: bool
    total_threads: int
    cores: int
    """Cores given to the configuration: workers x threads, capped by the cores it could run on."""
    oversubscribed: bool
    precision: str | None
    global_batch_size: int | None
    config: dict[str, Any]
    run_ids: list[str]
    num_failed: int
    samples_per_s: list[float]
    """Per repeat, in run order."""
    samples_per_s_median: float | None
    samples_per_s_iqr: float | None
    """IQR across repeats (None with one repeat)."""
    step_time_s_median: float | None
    step_time_rel_iqr: float | None
    """Median over repeats of each run's step-time IQR / median."""
    train_time_s: float | None
    test_accuracy: float | None
    """Median final test accuracy; None for synthetic data or runs not evaluated."""
    target_accuracy: float | None
    time_to_target_s: float | None
    num_reached: int
    num_evaluated: int
    """Real-data runs that were evaluated: the denominator of `num_reached`."""
    peak_memory_bytes: float | None
    accuracy_curves: list[list[tuple[float, float]]]
    """(training-clock s, test accuracy) per real-data repeat."""
    breakdown_s: dict[str, float] | None
    steps_to_target: float | None = None
    """An emulation's: median steps to the target over its runs that reached it (its clock
    is one process's, no prediction of N workers' time: docs/emulation.md)."""
    samples_to_target: float | None = None
    """An emulation's: median training samples to the target, as `steps_to_target`."""
    samples_per_s_by_round: dict[str, float] = field(default_factory=dict)
    """Samples/s per round (median of the runs of that round, rarely more than one): a round
    is a repeat index within one sweep, or within one bench (its tag). Only runs stored with
    a repeat index have one."""
    time_to_target_s_by_round: dict[str, float] = field(default_factory=dict)
    """Time to target per round (keyed as `samples_per_s_by_round`), of real-data runs that
    reached it: pairs the platform table's time-to-target speedup."""
    unequal_steps: bool = False
    """Whether its runs' steps do unequal work by design (texts of unequal length): their
    step-time spread is the batches', not noise, and their throughput is over the mean step."""
    busy_rounds: frozenset[str] = frozenset()
    """Keys of `samples_per_s_by_round` in which a run ran on a busy machine: left out of
    the paired speedup while quiet rounds remain (the busy rule, `metrics.run_flags`)."""
    speedup: float | None = None
    paired_speedup: float | None = None
    """Median over rounds of samples/s / the baseline's samples/s in the same round
    (`metrics.paired`); None without a round shared with the baseline, or for the baseline."""
    paired_speedup_ci: tuple[float, float] | None = None
    """95% bootstrap interval over rounds of `paired_speedup`; None with fewer than 2 rounds."""
    paired_rounds: int = 0
    """Rounds in which both this configuration and the baseline completed a run."""
    paired_verdict: str | None = None
    """'faster than the baseline', 'slower than the baseline' (only where the interval
    excludes 1), 'no difference measurable here', or 'not trusted: busy machine' where every
    shared round had a busy run; None when not paired."""
    paired_trusted: bool = True
    """False where every round the paired speedup rests on had a run on a busy machine."""
    paired_busy_rounds: int = 0
    """Shared rounds with a busy run: left out of the paired speedup, or (not trusted) all
    of it."""
    efficiency_per_worker: float | None = None
    efficiency_per_core: float | None = None
    is_baseline: bool = False
    noisy: bool = False
    stalled_runs: int = 0
    """Completed runs whose mean step exceeds the median by more than `STALL_RATIO`."""
    stalls: str | None = None
    """`metrics.run_flags.stalls_note` of its runs: the worst stalled run's mean and median
    step and how many stalled; None when none did."""
    busy_runs: int = 0
    """Completed runs during which other work was found using the machine."""
    notes: list[str] = field(default_factory=list)
    # Hardware figures (reporting/hardware.py): medians over the runs; None = not known.
    achieved_tflops: float | None = None
    mfu: float | None = None
    """Achieved model FLOP/s over the theoretical peak of the devices used."""
    mfu_vs_probe: float | None = None
    cpu_package_j: float | None = None
    gpu_j: float | None = None
    device_type: str = "cpu"
    devices: int = 0
    """GPUs, or CPU cores: what a device-hour price is paid for."""
    device_kind: str | None = None
    device_name: str | None = None
    price_key: str | None = None
    price_per_device_hour: float | None = None
    cost_usd: float | None = None
    """Devices x training clock x price, median over the runs."""
    cost_to_target_usd: float | None = None
    num_samples: int | None = None
    framework: str = "pytorch"
    """The framework that trained its runs."""
    data_wait_share: float | None = None
    """A script run's share of the step time spent waiting for data (the slowest rank's),
    median over the runs; None for built-in runs, which record none."""
    data_wait_s_median: float | None = None
    """A script run's median data wait a step, median over the runs."""
    disagreements: list[str] = field(default_factory=list)
    """What the ranks of its script runs disagreed on (`script_notes.disagreement_text`),
    each said once."""
    epochs_trained: float | None = None
    """Median over its runs of the epochs each trained: the config's epochs, fewer for a run
    that stopped at its target (its `num_steps` of `planned_steps`); None for runs of a
    number of steps."""

    @property
    def repeats(self) -> int:
        """Completed runs."""
        return len(self.run_ids)

    @property
    def samples_per_s_rel_iqr(self) -> float | None:
        return relative_iqr(self.samples_per_s)

    @property
    def synthetic(self) -> bool:
        return self.data_kind == "synthetic"

    @property
    def emulated(self) -> bool:
        """Whether its runs are accuracy emulations of N workers in one process."""
        return isinstance(self.config.get("emulation"), dict)

    @property
    def settings(self) -> StoredSettings:
        """Its runs' settings, typed (`results.stored_settings`); `config` keeps them flat,
        for what reads every setting by name (the labels of the settings that differ)."""
        return StoredSettings.of(self.config)


@dataclass(frozen=True)
class Series:
    """Configurations of one workload that differ only in their worker count (for plots)."""

    name: str
    keys: list[str]
    """Configuration keys, by increasing workers."""


@dataclass(frozen=True)
class AffinityRow:
    """One row of the classic table: setting | processing time per step | % gain vs slowest."""

    label: str
    setting: str
    step_time_ms: float
    gain_vs_slowest_pct: float
    """(slowest time - this time) / slowest time x 100: the share of processing time saved."""
    oversubscribed: bool
    pinned: bool


@dataclass(frozen=True)
class WorkloadSection:
    """Everything the report says about one workload."""

    workload: str
    configurations: list[Configuration]
    baseline: Configuration | None
    baseline_rule: str
    series: list[Series]
    amdahl: AmdahlFit | None
    amdahl_note: str
    affinity_rows: list[AffinityRow]
    """Empty unless the configurations differ in parallel setting."""
    affinity_note: str = ""

    def configuration(self, key: str) -> Configuration:
        return next(c for c in self.configurations if c.key == key)


@dataclass(frozen=True)
class ReportData:
    """A whole report's figures."""

    title: str
    source: str
    """What was reported: 'sweep NAME (ID)' or 'runs ID, ID, ...'."""
    sweep_id: str | None
    workloads: list[WorkloadSection]
    not_completed: list[NotCompleted]
    machines: list[dict[str, Any]]
    """Distinct machines the runs ran on: cpu_model, logical_cores, torch_version, hostname."""
    notes: list[str]

    @property
    def configurations(self) -> list[Configuration]:
        return [c for section in self.workloads for c in section.configurations]
