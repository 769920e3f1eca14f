"""A run's result as typed objects, and the one place its stored summary is made from them.

A training run's measurements are `RunMetrics` (made by train/summary.py under the rules of
docs/methodology.md); an emulation's are `EmulationMetrics` (emulation/summary.py). Either,
with the workers' facts, the data's source and (for a run) its hardware figures and energy,
is a `RunResult`; `RunResult.summary()` is the JSON stored in the `runs` table, the same
keys as ever, so stores written before keep reading. Exports take their columns from these
fields (results/export.py), never from guessed keys.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import asdict, dataclass, field
from typing import Any, Union, get_args, get_origin, get_type_hints

from trainscale.hardware.contention import Contention
from trainscale.hardware.figures import HardwareFigures


@dataclass(frozen=True, kw_only=True)
class AccuracyMetrics:
    """What every stored run measured of its optimisation (accuracy figures are None where
    no accuracy may be claimed: synthetic data, evaluation off)."""

    target_accuracy: float
    """The test accuracy time to target is measured to."""
    test_accuracy: float | None = None
    """The last evaluation's test accuracy."""
    test_loss: float | None = None
    test_macro_f1: float | None = None
    time_to_target_s: float | None = None
    """Training clock at the first evaluation reaching the target; None if none did."""
    accuracy_curve: list[list[float]] = field(default_factory=list)
    """[training clock s, test accuracy] at every evaluation."""
    train_time_s: float
    """The training clock: every step (warm-up included) and pre-training, no evaluation."""
    eval_time_s: float
    """Time spent evaluating, off the training clock."""
    num_steps: int
    num_samples: int
    """Samples trained on (num_steps x the global batch)."""
    planned_steps: int | None = None
    """The steps the run's length planned; `num_steps` is fewer when it stopped at its
    target. None for runs stored before it was recorded."""
    stopped_at_target: bool = False
    """Whether training ended at the first evaluation that reached the target
    (`--stop-at-target`): the final accuracy is that evaluation's, `num_steps` below
    `planned_steps`."""
    pretrain_time_s: float | None = None
    """The pre-training phase's share of the training clock; None without a phase."""
    peak_memory_bytes_per_worker: list[int] = field(default_factory=list)
    """Each worker's peak resident memory, rank order."""

    def to_dict(self) -> dict[str, Any]:
        """The summary keys these metrics take."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class RunMetrics(AccuracyMetrics):
    """A training run's headline measurements (docs/methodology.md): throughput and step
    times leave the first `warmup_steps_excluded` steps out and take the slowest rank's
    time of each step."""

    samples_per_s: float
    """Global samples per second: the global batch over the median timed step (the mean
    one where steps do unequal work: `unequal_steps`)."""
    samples_per_s_per_worker: float
    """One worker's batch over the same step time as `samples_per_s`."""
    step_time_s_median: float
    """The run's step time: the median timed step."""
    step_time_s_p90: float
    step_time_s_iqr: float
    num_timed_steps: int
    warmup_steps_excluded: int
    """Steps left out of the statistics (0 for a run shorter than its warm-up)."""
    epoch_time_s: float | None = None
    """Median training time of the full epochs; None without one."""
    supervised_time_s: float
    """The training clock less pre-training."""
    compile_time_s: float | None = None
    """torch.compile's time, off the clock; None when not compiled."""
    device_warmup_s: float | None = None
    """A CUDA run's warm-up pass before its first step (library loading, cuDNN autotuning),
    off the clock; None where none ran (CPU runs, compiled runs)."""
    flops_per_sample: int | None = None
    """Forward and backward FLOPs of one sample, counted by torch."""
    flops_per_sample_by_kind: dict[str, int] | None = None
    """The same by kind of operator (`metrics.flops.FLOP_KINDS`): on a GPU, which of them
    may compute fp32 on TF32 tensor cores depends on the kind."""
    peak_gpu_memory_bytes_per_worker: list[int] | None = None
    breakdown_s: dict[str, float | None] | None = None
    """Median seconds per phase of the sampled steps (slowest rank's); None when off."""
    breakdown_sampled_steps: int = 0
    step_time_s_mean: float | None = None
    """The mean timed step: far above the median when the run stalled (metrics.run_flags)."""
    samples_per_s_mean: float | None = None
    """The global batch over the mean timed step (what a long run's wall clock averages)."""
    unequal_steps: bool = False
    """Whether the workload's steps do unequal work by design (texts of different lengths):
    its throughput is then over the mean timed step, and no stall is judged from the mean."""


@dataclass(frozen=True, kw_only=True)
class EmulationMetrics(AccuracyMetrics):
    """An emulation's measurements: the optimisation of N workers in one process, timed by
    that process only (docs/emulation.md)."""

    emulation: dict[str, Any]
    """The emulated setting and its figures: mode, workers, batches, steps to target,
    the steps curve, mode-specific figures such as staleness."""


@dataclass(frozen=True)
class RunResult:
    """Everything a completed run stores besides its per-epoch rows and step times."""

    metrics: RunMetrics | EmulationMetrics
    workers: list[dict[str, Any]]
    """What each worker actually ran with (cores, threads, pid, host, peak memory)."""
    data_source: str
    """Where the data came from (a directory, a file, or the synthetic generator)."""
    hardware: HardwareFigures | None = None
    """Devices, achieved FLOP/s and MFU (training runs)."""
    energy_j: dict[str, Any] | None = None
    """Energy by source over the run, where the hardware exposes it (training runs)."""
    pretrain: dict[str, Any] | None = None
    """The pre-training phase's figures (the DBN's CD epochs), when it had one."""
    contention: Contention | None = None
    """What else used the machine while the run trained, and the verdict (training runs).
    Rank 0 stores 'unknown'; the process that launched the workers replaces it with what its
    sampler saw once they have exited (runner/launch.py)."""
    extra: dict[str, Any] | None = None
    """Keys only some runs have, stored as they are: a script run's data wait
    (train/script_summary.py)."""

    def summary(self) -> dict[str, Any]:
        """The stored summary: the metrics' keys, the workers, the data source, and for a
        training run its energy, hardware figures and contention."""
        out = measured_summary(self.metrics, self.pretrain)
        out["workers"] = self.workers
        out["data_source"] = self.data_source
        if isinstance(self.metrics, RunMetrics):
            out["energy_j"] = self.energy_j
            out.update((self.hardware or HardwareFigures()).summary())
            if self.contention is not None:
                out.update(self.contention.summary())
        out.update(self.extra or {})
        return out


def measured_summary(
    metrics: RunMetrics | EmulationMetrics, pretrain: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The summary keys of what training measured (before the workers' facts, the data's
    source and the hardware figures join them in `RunResult.summary`)."""
    out = metrics.to_dict()
    if pretrain:
        out["pretrain"] = dict(pretrain)
    return out


def field_names(cls: type, numbers_only: bool = False) -> tuple[str, ...]:
    """The fields of a result dataclass, a class's own before those it inherits (so a run's
    throughput leads and the accuracy figures every run shares follow); with `numbers_only`,
    only those holding one number or None (the columns a CSV export gives them)."""
    hints = get_type_hints(cls)
    declared = [
        name
        for klass in cls.__mro__
        if dataclasses.is_dataclass(klass)
        for name in klass.__dict__.get("__annotations__", {})
    ]
    names = [name for name in dict.fromkeys(declared) if name in hints]
    return tuple(name for name in names if not numbers_only or _is_number(hints[name]))


def _is_number(hint: Any) -> bool:
    if hint in (int, float):
        return True
    if get_origin(hint) in (Union, types.UnionType):
        return all(arg in (int, float, type(None)) for arg in get_args(hint))
    return False
