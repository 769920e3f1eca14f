"""A stored run's figures as the readers of the store ask about them: typed, each with the one
meaning a missing or unreadable value has.

A run's summary is JSON that the trainscale of its day wrote (`RunResult.summary()`): runs
stored before a figure existed lack it, a failed run has few, and a store may have been
edited by hand. Rather than every report, the simulator and the sweep summary asking
`record.summary.get("test_accuracy")` and checking its type their own way, `StoredFigures.of`
says once what each value means when it is absent or not of its type: not measured (None, or
empty). The summary stays the store's record of everything a run measured; this is the part
its readers compute with. (`results/schema.py` migrates the JSON itself and reads it raw;
`metrics/` judges summaries as written, beneath this layer.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainscale.results.stored_settings import as_number, as_text, as_whole, is_number


@dataclass(frozen=True)
class StoredDevices:
    """The devices a run computed on, as its summary recorded them (`hardware`)."""

    device_type: str
    """'cpu' or 'cuda'."""
    devices: int
    """GPUs over every node, or the CPU cores its workers could compute on."""
    kind: str | None
    """The price table's kind ('cpu-core', a GPU kind); None where the table lacked it."""
    device: str | None
    """The GPU's name, or the CPU model."""

    @classmethod
    def of(cls, value: Any) -> StoredDevices | None:
        """The recorded devices; None where not recorded (runs stored before) or unreadable."""
        devices = as_whole(value.get("devices")) if isinstance(value, dict) else None
        if devices is None:
            return None
        return cls(
            device_type=as_text(value.get("device_type")) or "cpu",
            devices=devices,
            kind=as_text(value.get("kind")),
            device=as_text(value.get("device")),
        )


@dataclass(frozen=True)
class StoredFigures:
    """The figures of one stored run that reports, the simulator and sweeps read."""

    samples_per_s: float | None = None
    """Global training throughput."""
    step_time_s_median: float | None = None
    step_time_s_mean: float | None = None
    step_time_s_iqr: float | None = None
    train_time_s: float | None = None
    """Seconds on the training clock."""
    test_accuracy: float | None = None
    """The last evaluation's accuracy; None where the run never evaluated."""
    target_accuracy: float | None = None
    """The accuracy its time to target counts to; None where none was asked for (a script run
    given no `--target-accuracy`, whose summary holds the stand-in 1.0)."""
    time_to_target_s: float | None = None
    """Training-clock seconds until the target was first reached; None: not reached (or
    never evaluated)."""
    accuracy_curve: tuple[tuple[float, float], ...] = ()
    """(training-clock seconds, accuracy) of each evaluation."""
    flops_per_sample: float | None = None
    """Training FLOPs per sample; None where not counted (or not positive)."""
    data_wait_s_median: float | None = None
    """A script run's median wait for its next batch."""
    data_wait_share: float | None = None
    """That wait's share of the step."""
    peak_memory_bytes: float | None = None
    """The largest worker's peak memory."""
    num_steps: int | None = None
    """Optimizer steps trained."""
    planned_steps: int | None = None
    """Steps the run was planned to train (runs stored before it: None)."""
    warmup_steps_excluded: int = 0
    """Leading steps left out of the step-time statistics."""
    unequal_steps: bool = False
    """Whether its steps did unequal work by design (text batched by length)."""
    breakdown_s: Mapping[str, float] = field(default_factory=dict)
    """The step's parts (data, forward, backward, optimizer, ...): every numeric entry."""
    worker_cores: frozenset[int] = frozenset()
    """The cores its workers reported running on."""
    achieved_tflops: float | None = None
    """Model TFLOP/s achieved."""
    mfu: float | None = None
    """Model FLOP utilisation against the device's theoretical peak."""
    mfu_vs_probe: float | None = None
    """The same against the matmul rate a probe measured."""
    num_samples: float | None = None
    """Samples trained."""
    energy_j: Mapping[str, float] = field(default_factory=dict)
    """Energy by meter (`cpu_package_j`, `gpu_j`): every numeric reading."""
    hardware: StoredDevices | None = None
    """The devices it computed on; None for runs stored before they were recorded."""
    steps_to_target: float | None = None
    """An emulation's steps to its target (None: not reached, or no emulation)."""
    samples_to_target: float | None = None
    """An emulation's training samples to its target, as `steps_to_target`."""

    @classmethod
    def of(cls, summary: Mapping[str, Any]) -> StoredFigures:
        """The figures of a stored summary: a value that is missing or not of its type is
        not measured."""
        return cls(
            samples_per_s=as_number(summary.get("samples_per_s")),
            step_time_s_median=as_number(summary.get("step_time_s_median")),
            step_time_s_mean=as_number(summary.get("step_time_s_mean")),
            step_time_s_iqr=as_number(summary.get("step_time_s_iqr")),
            train_time_s=as_number(summary.get("train_time_s")),
            test_accuracy=as_number(summary.get("test_accuracy")),
            target_accuracy=(
                None
                if summary.get("target_accuracy_given") is False
                else as_number(summary.get("target_accuracy"))
            ),
            time_to_target_s=as_number(summary.get("time_to_target_s")),
            accuracy_curve=_curve(summary.get("accuracy_curve")),
            flops_per_sample=_positive(summary.get("flops_per_sample")),
            data_wait_s_median=as_number(summary.get("data_wait_s_median")),
            data_wait_share=as_number(summary.get("data_wait_share")),
            peak_memory_bytes=_largest(summary.get("peak_memory_bytes_per_worker")),
            num_steps=as_whole(summary.get("num_steps")),
            planned_steps=as_whole(summary.get("planned_steps")),
            warmup_steps_excluded=as_whole(summary.get("warmup_steps_excluded")) or 0,
            unequal_steps=bool(summary.get("unequal_steps")),
            breakdown_s=_numbers_by_name(summary.get("breakdown_s")),
            worker_cores=_worker_cores(summary.get("workers")),
            achieved_tflops=as_number(summary.get("achieved_tflops")),
            mfu=as_number(summary.get("mfu")),
            mfu_vs_probe=as_number(summary.get("mfu_vs_probe")),
            num_samples=as_number(summary.get("num_samples")),
            energy_j=_numbers_by_name(summary.get("energy_j")),
            hardware=StoredDevices.of(summary.get("hardware")),
            steps_to_target=as_number(_emulation(summary).get("steps_to_target")),
            samples_to_target=as_number(_emulation(summary).get("samples_to_target")),
        )

    @property
    def evaluated(self) -> bool:
        """Whether the run evaluated its model at least once."""
        return bool(self.accuracy_curve) or self.test_accuracy is not None

    @property
    def step_time_rel_iqr(self) -> float | None:
        """The spread of its step times, as the IQR over the median; None where fewer than
        two steps were timed (one step has no spread: its IQR of 0 would read as steady)."""
        median, iqr = self.step_time_s_median, self.step_time_s_iqr
        if median is None or iqr is None or median <= 0:
            return None
        if self.num_steps is not None and self.num_steps - self.warmup_steps_excluded < 2:
            return None
        return iqr / median


def _emulation(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """An emulation's own figures in its summary; empty for any other run."""
    facts = summary.get("emulation")
    return facts if isinstance(facts, Mapping) else {}


def _positive(value: Any) -> float | None:
    number = as_number(value)
    return number if number is not None and number > 0 else None


def _largest(value: Any) -> float | None:
    """A per-worker list's largest number (runs stored before lists: one number)."""
    if isinstance(value, list):
        numbers = [float(v) for v in value if is_number(v)]
        return max(numbers) if numbers else None
    return as_number(value)


def _curve(value: Any) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, list):
        return ()
    return tuple(
        (float(point[0]), float(point[1]))
        for point in value
        if isinstance(point, (list, tuple)) and len(point) == 2 and all(map(is_number, point))
    )


def _numbers_by_name(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {str(name): float(number) for name, number in value.items() if is_number(number)}


def _worker_cores(value: Any) -> frozenset[int]:
    if not isinstance(value, list):
        return frozenset()
    cores: set[int] = set()
    for facts in value:
        if isinstance(facts, dict) and isinstance(facts.get("cores"), list):
            cores.update(c for c in facts["cores"] if as_whole(c) is not None)
    return frozenset(cores)
