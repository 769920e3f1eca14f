"""Predictions: a calibrated worker, a gradient layout and a cluster, over worker counts.

For each worker count p the per-worker batch is either fixed (weak scaling: each worker
keeps its batch, the global batch grows) or the global batch is fixed and split (strong
scaling). The step is simulated with the slowest worker's factor sampled `samples` times;
the reported step time is the median over the samples (as runs report their median step),
and the throughput is global batch / mean step time (as runs report samples over the
summed step times). Speedup is against the predicted one-worker throughput of the same
scaling; efficiency = speedup / p.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from trainscale.errors import ConfigError
from trainscale.metrics.throughput import throughput
from trainscale.simulator.buckets import GradientLayout
from trainscale.simulator.calibrate import Calibration
from trainscale.simulator.cluster import ClusterSpec
from trainscale.simulator.collectives import allreduce_s
from trainscale.simulator.model import StepCosts, simulate_step
from trainscale.simulator.stragglers import DEFAULT_SAMPLES, slowest_factor_samples


@dataclass(frozen=True)
class Prediction:
    """The predicted step of one worker count."""

    workers: int
    nodes: int
    per_worker_batch: int
    global_batch: int
    algorithm: str
    step_time_s: float
    """Median over the Monte Carlo samples."""
    step_time_s_mean: float
    """Mean over the samples: what a long run's wall clock averages (time to accuracy)."""
    samples_per_s: float
    """Global batch over the median step: a measured run's throughput, predicted."""
    data_s: float
    forward_s: float
    backward_s: float
    optimizer_s: float
    comm_s: float
    """All buckets' communication end to end (hidden or not)."""
    exposed_comm_s: float
    """Median time the step waits for communication after backward compute."""
    straggler_s: float
    """Median step minus the step at the median worker's pace: the cost of waiting for the
    slowest worker."""
    num_buckets: int
    speedup: float | None = None
    efficiency: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def exposed_comm_share(self) -> float:
        """Exposed communication as a share of the step."""
        return self.exposed_comm_s / self.step_time_s if self.step_time_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        out["exposed_comm_share"] = self.exposed_comm_share
        return out


def step_costs(
    calibration: Calibration,
    layout: GradientLayout,
    cluster: ClusterSpec,
    workers: int,
    per_worker_batch: int,
    *,
    algorithm: str | None = None,
    grad_accum: int = 1,
) -> StepCosts:
    """Nominal costs of one worker's step at `workers` on `cluster`."""
    if per_worker_batch < 1:
        raise ConfigError(f"the per-worker batch must be at least 1, got {per_worker_batch}")
    micro = per_worker_batch / grad_accum
    compute = grad_accum * calibration.compute_s(micro)
    backward = compute * calibration.backward_share
    topology = cluster.topology()
    if calibration.network is not None:
        # An effective link fitted from runs of this machine stands in for the intra-node link.
        topology = replace(topology, intra=calibration.network.link)
    chosen = algorithm or cluster.algorithm
    comm: tuple[float, ...] = ()
    shares: tuple[float, ...] = ()
    if workers > 1:
        comm = tuple(allreduce_s(b.num_bytes, workers, topology, chosen) for b in layout.buckets)
        shares = tuple(b.ready_share for b in layout.buckets)
    return StepCosts(
        data_s=calibration.data_s_per_sample * per_worker_batch,
        forward_s=compute - backward,
        backward_s=backward,
        optimizer_s=calibration.optimizer_s,
        bucket_ready_shares=shares,
        bucket_comm_s=comm,
        overlap=cluster.overlap,
    )


def predict_one(
    calibration: Calibration,
    layout: GradientLayout,
    cluster: ClusterSpec,
    workers: int,
    per_worker_batch: int,
    *,
    algorithm: str | None = None,
    grad_accum: int = 1,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    check_fit: bool = True,
) -> Prediction:
    """The predicted step at `workers` workers of `per_worker_batch` each."""
    if check_fit:
        cluster.check_workers(workers)
    costs = step_costs(
        calibration,
        layout,
        cluster,
        workers,
        per_worker_batch,
        algorithm=algorithm,
        grad_accum=grad_accum,
    )
    factors = slowest_factor_samples(workers, calibration.straggler_sigma, samples, seed)
    simulated = simulate_step(costs, factors)
    nominal = simulate_step(costs, np.ones(1))
    median_step = float(np.median(simulated.step_s))
    mean_step = float(np.mean(simulated.step_s))
    global_batch = per_worker_batch * workers
    nodes, _ = cluster.topology().placement(workers)
    return Prediction(
        workers=workers,
        nodes=nodes,
        per_worker_batch=per_worker_batch,
        global_batch=global_batch,
        algorithm=(algorithm or cluster.algorithm) if workers > 1 else "none",
        step_time_s=median_step,
        step_time_s_mean=mean_step,
        # The measured runs' definition (metrics.throughput), so validation compares like
        # with like.
        samples_per_s=throughput(global_batch, median_step),
        data_s=costs.data_s,
        forward_s=costs.forward_s,
        backward_s=costs.backward_s,
        optimizer_s=costs.optimizer_s,
        comm_s=costs.comm_s,
        exposed_comm_s=float(np.median(simulated.exposed_comm_s)),
        straggler_s=max(0.0, median_step - float(nominal.step_s[0])),
        num_buckets=len(layout.buckets) if workers > 1 else 0,
    )


def predict_scaling(
    calibration: Calibration,
    layout: GradientLayout,
    cluster: ClusterSpec,
    workers: Sequence[int],
    *,
    per_worker_batch: int | None = None,
    global_batch: int | None = None,
    algorithm: str | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> list[Prediction]:
    """Predictions for every worker count, with speedup and efficiency against one worker.

    Give `per_worker_batch` (weak scaling) or `global_batch` (strong scaling), not both;
    with neither, each worker keeps the calibration's batch.
    """
    if per_worker_batch is not None and global_batch is not None:
        raise ConfigError("give a per-worker batch or a global batch, not both")
    if not workers:
        raise ConfigError("give at least one worker count")
    for count in workers:
        cluster.check_workers(count)
        if global_batch is not None and global_batch % count:
            raise ConfigError(
                f"--global-batch-size {global_batch} is not divisible by {count} workers"
            )
    batch = per_worker_batch or calibration.reference_batch_size

    def batch_at(count: int) -> int:
        return global_batch // count if global_batch is not None else batch

    def predict_at(count: int) -> Prediction:
        return predict_one(
            calibration,
            layout,
            cluster,
            count,
            batch_at(count),
            algorithm=algorithm,
            samples=samples,
            seed=seed,
        )

    baseline = predict_at(1)
    out = []
    for count in workers:
        predicted = predict_at(count)
        speedup = predicted.samples_per_s / baseline.samples_per_s
        notes = []
        if cluster.overlap < 1 and count > 1:
            notes.append(f"communication overlaps compute at {cluster.overlap:g}")
        out.append(
            Prediction(
                **{
                    **asdict(predicted),
                    "speedup": speedup,
                    "efficiency": speedup / count,
                    "notes": tuple(notes),
                }
            )
        )
    return out
