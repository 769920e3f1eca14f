"""Time to accuracy = steps to the target (from emulation) x predicted time per step.

Steps to target depend on the optimisation (mode, workers, global batch), not on the
hardware, and `trainscale emulate` measures them; time per step depends on the hardware,
and the performance model predicts it. Their product says when more hardware stops buying
faster training: a larger global batch needs more steps (or more samples) to reach the
target, and past some worker count the shorter step no longer pays for them.

Time per step, by mode (the training clock sums step times, so the mean step is used):

- sync: one DDP step of N workers at per-worker batch b (the performance model);
- local-sgd: each worker steps alone (compute + optimizer) and every H steps the workers
  average their parameters (an all-reduce of the whole model, not overlapped); the slowest
  worker's lead is over H steps, so its factor's spread shrinks as 1/sqrt(H);
- async: a step applies one worker's gradient at the parameter server. N workers produce
  gradients at N / (compute + push + pull) per second, and the server applies at most
  1 / (receive + send + optimizer) per second; the step time is the slower of the two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from trainscale.errors import TrainscaleError
from trainscale.results.records import RunRecord
from trainscale.simulator.buckets import GradientLayout
from trainscale.simulator.calibrate import Calibration
from trainscale.simulator.cluster import ClusterSpec
from trainscale.simulator.collectives import allreduce_s, parameter_server_s
from trainscale.simulator.predict import predict_one, step_costs
from trainscale.simulator.stragglers import (
    DEFAULT_SAMPLES,
    mean_factor,
    slowest_factor_samples,
)

MODES = ("sync", "async", "local-sgd")


@dataclass(frozen=True)
class EmulatedSetting:
    """What an emulation run says about one setting (the `summary["emulation"]` contract)."""

    run_id: str
    mode: str
    workers: int
    global_batch_size: int
    per_worker_batch_size: int
    steps_to_target: int | None
    samples_to_target: int | None
    target_accuracy: float | None
    local_steps: int | None = None


def emulated_setting(record: RunRecord) -> EmulatedSetting | None:
    """The emulation facts of a stored run, or None if it is not a usable emulation."""
    facts = record.summary.get("emulation")
    if record.status != "completed" or not isinstance(facts, dict):
        return None
    mode, workers = facts.get("mode"), facts.get("workers")
    global_batch = facts.get("global_batch_size")
    if mode not in MODES or not isinstance(workers, int) or not isinstance(global_batch, int):
        return None
    per_worker = facts.get("per_worker_batch_size")
    if not isinstance(per_worker, int):
        per_worker = global_batch if mode == "async" else max(1, global_batch // workers)
    steps = facts.get("steps_to_target")
    samples = facts.get("samples_to_target")
    local = facts.get("local_steps")
    return EmulatedSetting(
        run_id=record.run_id,
        mode=mode,
        workers=workers,
        global_batch_size=global_batch,
        per_worker_batch_size=per_worker,
        steps_to_target=steps if isinstance(steps, int) else None,
        samples_to_target=samples if isinstance(samples, int) else None,
        target_accuracy=facts.get("target_accuracy"),
        local_steps=local if isinstance(local, int) and local > 0 else None,
    )


@dataclass(frozen=True)
class TimeToAccuracyRow:
    """One emulated setting with its predicted time to the target."""

    setting: EmulatedSetting
    step_time_s: float | None
    """Predicted mean time per step (None where the cluster cannot hold the workers)."""
    time_to_target_s: float | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def device_seconds(self) -> float | None:
        """Workers x time to target: what the answer costs in device time."""
        if self.time_to_target_s is None:
            return None
        return self.time_to_target_s * self.setting.workers

    def to_dict(self) -> dict[str, Any]:
        s = self.setting
        return {
            "run_id": s.run_id,
            "mode": s.mode,
            "workers": s.workers,
            "global_batch_size": s.global_batch_size,
            "per_worker_batch_size": s.per_worker_batch_size,
            "local_steps": s.local_steps,
            "steps_to_target": s.steps_to_target,
            "samples_to_target": s.samples_to_target,
            "target_accuracy": s.target_accuracy,
            "step_time_s": self.step_time_s,
            "time_to_target_s": self.time_to_target_s,
            "device_seconds": self.device_seconds,
            "notes": list(self.notes),
        }


def step_time_s(
    setting: EmulatedSetting,
    calibration: Calibration,
    layout: GradientLayout,
    cluster: ClusterSpec,
    *,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> float:
    """Predicted mean seconds per step of an emulated setting on `cluster` (module doc)."""
    workers, batch = setting.workers, setting.per_worker_batch_size
    cluster.check_workers(workers)
    if setting.mode == "sync":
        return predict_one(
            calibration, layout, cluster, workers, batch, samples=samples, seed=seed
        ).step_time_s_mean
    alone = step_costs(calibration, layout, cluster, 1, batch)
    local_s = alone.compute_s + alone.optimizer_s
    topology = cluster.topology()
    if calibration.network is not None:
        topology = replace(topology, intra=calibration.network.link)
    if setting.mode == "local-sgd":
        period = setting.local_steps or 1
        sigma = calibration.straggler_sigma / math.sqrt(period)
        factors = slowest_factor_samples(workers, sigma, samples, seed)
        average = allreduce_s(layout.total_bytes, workers, topology, cluster.algorithm)
        return float(np.mean(period * factors * local_s + average)) / period
    # async through a parameter server
    network = topology.inter or topology.intra
    server = topology.server or network
    exchange = parameter_server_s(layout.total_bytes, 1, network, server, topology.servers)
    worker_cycle = mean_factor(calibration.straggler_sigma) * alone.compute_s + exchange
    per_update = (
        2 * layout.total_bytes * server.beta_s_per_byte / topology.servers + alone.optimizer_s
    )
    return max(worker_cycle / workers, per_update)


def predict_time_to_accuracy(
    settings: Sequence[EmulatedSetting],
    calibration: Calibration,
    layout: GradientLayout,
    cluster: ClusterSpec,
    *,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> list[TimeToAccuracyRow]:
    """Every emulated setting with its predicted step time and time to target."""
    rows = []
    for setting in sorted(settings, key=lambda s: (s.mode, s.workers, s.global_batch_size)):
        notes = []
        try:
            step = step_time_s(setting, calibration, layout, cluster, samples=samples, seed=seed)
        except TrainscaleError as error:
            rows.append(TimeToAccuracyRow(setting, None, None, (str(error),)))
            continue
        if setting.steps_to_target is None:
            notes.append("the emulation never reached the target")
            total = None
        else:
            total = setting.steps_to_target * step
        rows.append(TimeToAccuracyRow(setting, step, total, tuple(notes)))
    return rows


def refuse_mixed_targets(
    workload: str, emulated: Sequence[tuple[RunRecord, EmulatedSetting]]
) -> None:
    """TrainscaleError where the emulations reach different target accuracies: their times
    to target do not compare (fewer steps to a lower target is no faster training), and
    the fastest setting would be picked across them. The line names each target's
    emulations (the ids of their tags) for --emulation."""
    by_target: dict[float | None, set[str]] = {}
    for record, setting in emulated:
        tag = record.tag or ""
        name = tag.removeprefix("emulate:") if tag.startswith("emulate:") else record.short_id
        by_target.setdefault(setting.target_accuracy, set()).add(name)
    if len(by_target) < 2:
        return
    listed = "; ".join(
        f"{'no target' if target is None else f'{target:g}'}: {', '.join(sorted(names))}"
        for target, names in sorted(by_target.items(), key=lambda item: item[0] or 0.0)
    )
    raise TrainscaleError(
        f"the emulations of {workload} reach different target accuracies ({listed}): times "
        "to different targets do not compare; choose one target's emulation with "
        "--emulation ID"
    )


def best_by_mode(rows: Sequence[TimeToAccuracyRow]) -> dict[str, dict[str, Any]]:
    """Per mode: the fastest setting, and whether more workers than it stop helping."""
    out: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        reached = [r for r in rows if r.setting.mode == mode and r.time_to_target_s is not None]
        if not reached:
            continue
        best = min(reached, key=lambda r: (r.time_to_target_s, r.setting.workers))
        beyond = [r for r in reached if r.setting.workers > best.setting.workers]
        out[mode] = {
            "fastest_workers": best.setting.workers,
            "fastest_global_batch_size": best.setting.global_batch_size,
            "fastest_time_to_target_s": best.time_to_target_s,
            "more_workers_slower": sorted({r.setting.workers for r in beyond}),
        }
    return out
