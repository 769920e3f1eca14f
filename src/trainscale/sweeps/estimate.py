"""What a sweep will measure and how long it will take, roughly, before it runs.

Accuracy: a configuration measures it when it trains on real data with evaluation on.
Duration: training samples x a measured rate.

The estimate is arithmetic, not a measurement of this machine: each configuration's
training samples (steps x global batch, or epochs x training-set size; for a run that stops
at its target, the samples its workload was measured to need to reach it, where known)
times repeats, multiplied by the seconds per sample measured for its workload on a 2-core
machine with 1 process x 2 threads (docs/workloads.md, "Per-workload epoch times"; both
figures are the workload's `rough_cost`, declared beside its recipe), plus a
fixed start-up cost per run (worker launch, data loading, warm-up). Evaluation passes (a
run that stops at its target evaluates on its way there too), DBN pre-training and a faster
or slower machine are not modelled, so read it as "minutes or hours", within a factor of
about two; docs/sweeps.md says the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainscale.errors import TrainscaleError
from trainscale.workloads import get_workload

if TYPE_CHECKING:  # a type only: the bench's progress lines import this module, with no
    # sweep file to read, and so need no pydantic (the sweep file's models' library)
    from trainscale.sweeps.spec import SweepSpec

UNMEASURED_EPOCH_S = 100.0
"""Seconds an epoch is assumed to take for a workload that declares no `rough_cost` (a
user's)."""

RUN_OVERHEAD_S = 8.0
"""Seconds a run costs besides its timed steps: starting the workers, loading the data,
the untimed warm-up (measured roughly on the same machine for the MNIST CNN)."""


@dataclass(frozen=True)
class Estimate:
    """A sweep's size and its rough duration."""

    runs: int
    seconds: float
    """Rough wall time on a 2-core machine (see the module docstring for how)."""

    def text(self) -> str:
        """'12 runs, about 8 min'."""
        return f"{self.runs} runs, about {duration_text(self.seconds)}"


def duration_text(seconds: float) -> str:
    """A rough duration in the largest sensible unit: '40 s', '8 min', '2.5 h'."""
    if seconds < 90:
        return f"{max(10, round(seconds, -1)):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_sweep(spec: SweepSpec) -> Estimate:
    """The rough duration of every run of `spec` (no configuration is resolved or run)."""
    total = 0.0
    configurations = spec.configurations()
    for _, overrides in configurations:
        total += _run_seconds({**spec.base, **overrides})
    return Estimate(len(configurations) * spec.repeats, total * spec.repeats)


def measures_accuracy(spec: SweepSpec) -> bool:
    """Whether some configuration of `spec` trains on real data with evaluation on (the
    defaults): synthetic data or `evaluate = false` measure throughput only."""
    for _, overrides in spec.configurations():
        fields = {**spec.base, **overrides}
        if fields.get("data", "real") != "synthetic" and fields.get("evaluate", True):
            return True
    return False


@dataclass(frozen=True)
class DataNeed:
    """A workload of a sweep that trains on real data, and whether that data is here."""

    workload: str
    runs: int
    """The sweep's runs of this workload (repeats included)."""
    status: str
    """'here' (found), 'download' (not here; downloaded, checksummed, on first use) or
    'missing' (not here, and nothing to download: its runs are skipped or refused)."""
    reason: str = ""
    """The not-found line when the data is not here."""

    def text(self) -> str:
        """'mnist-cnn: here', 'tweets-text: MISSING here (4 runs skipped)'."""
        if self.status == "here":
            return f"{self.workload}: here"
        if self.status == "download":
            return f"{self.workload}: downloaded on first use"
        return f"{self.workload}: MISSING here ({self.runs} runs skipped)"


def data_needs(spec: SweepSpec) -> list[DataNeed]:
    """The real data `spec` trains on, per workload, looked for here without downloading
    anything (synthetic configurations need none)."""
    # Here, not at the top: data.tensors imports torch, which `trainscale --help` must not.
    from trainscale.data.tensors import DataRequest  # noqa: PLC0415

    runs: dict[str, int] = {}
    for _, overrides in spec.configurations():
        fields = {**spec.base, **overrides}
        if fields.get("data", "real") == "synthetic":
            continue
        name = get_workload(str(fields["workload"])).name
        runs[name] = runs.get(name, 0) + spec.repeats
    needs = []
    for name, count in runs.items():
        workload = get_workload(name)
        options = {k: v for k, v in spec.workload_options.items() if k in workload.options}
        try:
            workload.locate_real(DataRequest(download=False, options=options, prepare=False))
        except TrainscaleError as error:
            # A dataset with a download says so in its refusal ("(download disabled)").
            status = "download" if "(download disabled)" in str(error) else "missing"
            needs.append(DataNeed(name, count, status, str(error)))
        else:
            needs.append(DataNeed(name, count, "here"))
    return needs


def _run_seconds(fields: Mapping[str, Any]) -> float:
    workload = get_workload(str(fields["workload"]))
    size = workload.synthetic_size
    num_train = size.num_train if size is not None else 60_000
    cost = workload.rough_cost
    epoch_s = cost.epoch_s_2_cores if cost is not None else UNMEASURED_EPOCH_S
    workers = int(fields.get("workers") or 1)
    if fields.get("global_batch_size"):
        global_batch = int(fields["global_batch_size"])
    else:
        global_batch = int(fields.get("batch_size") or workload.recipe.batch_size) * workers
    samples: float
    if fields.get("steps"):  # the untimed warm-up steps are among them
        samples = int(fields["steps"]) * global_batch
    else:
        samples = float(fields.get("epochs") or workload.recipe.epochs) * num_train
    to_target = cost.samples_to_target if cost is not None else None
    if to_target is not None and _stops_at_its_target(fields, workload.target_accuracy):
        samples = min(samples, to_target)
    return RUN_OVERHEAD_S + samples * epoch_s / num_train


def _stops_at_its_target(fields: Mapping[str, Any], workload_target: float) -> bool:
    """Whether a configuration stops at its workload's own target (the one the table's
    samples reach): asked to stop, with an accuracy to reach."""
    return (
        bool(fields.get("stop_at_target"))
        and fields.get("target_accuracy") in (None, workload_target)
        and fields.get("data", "real") != "synthetic"
        and fields.get("evaluate", True) is not False
    )
