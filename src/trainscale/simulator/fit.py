"""Fit the simulator to part of a published scaling table, predict the rest.

A published table (simulator/published.py) gives a model's training throughput on 1, 8, 64,
... devices of one system. Without a run of our own on that system, the simulator's
compute comes from the cluster file: training FLOPs / (peak x efficiency) plus a fixed
per-step overhead, and its communication from the links' nominal bandwidth. Four figures are
what published systems differ in most; they are the free parameters here:

- `efficiency`: the share of the device's peak that training reaches, against the model's
  FLOPs as counted (direct convolution). Winograd and FFT convolution kernels do fewer
  multiplications than that, so on 3x3-convolution models (VGG-16) it may exceed 1;
- `overhead_s`: the per-step time that does not grow with the batch (dispatch, launches,
  input pipeline stalls, the framework's own bookkeeping);
- `straggler_sigma`: the spread of a device's step time (simulator/stragglers.py); a
  synchronous step waits for the slowest device, so it costs more the more devices there
  are (K80 boards sharing power between their two GPUs, input pipelines, PCIe contention);
- `bandwidth_scale`: achieved / nominal bandwidth of every link (NCCL or MPI reaching part of
  a link's rate, a shared network).

Only what the fit points can show is fitted: efficiency and overhead always (overhead is
told apart from efficiency by points at different batches; otherwise its cluster-file value
barely moves), the spread when a fit point has several devices, the bandwidth when one spans
several nodes (inside one node the gradient exchange of these models hides behind backward,
so single-node points cannot measure the network). The others keep the cluster file's value.
The fit is least squares on the log of throughput at the chosen points (a table's `fit`
split: the small configurations a user would have), with a weak pull toward the cluster
file's values that only matters where the points leave a parameter undetermined. Every other
point is predicted with the fitted parameters and compared with the published figure.

A point published only as scaling efficiency (speedup / devices) is compared as one: the
prediction's throughput at N devices over N times its throughput on one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from scipy.optimize import least_squares

from trainscale.errors import ConfigError
from trainscale.simulator.buckets import GradientLayout
from trainscale.simulator.calibrate import (
    Calibration,
    calibrate_from_peak,
    training_flops_per_sample,
)
from trainscale.simulator.cluster import ClusterSpec
from trainscale.simulator.predict import predict_one
from trainscale.simulator.published import load_table
from trainscale.simulator.setup import cached_layout

PRIOR_WEIGHT = 0.001
"""Weight of the pull toward the cluster file's values, per unit of log-parameter: small
enough that the fit points move a free parameter freely (a 0.1% miss weighs as much as a
factor of e away from the prior: a stronger pull biased a fitted spread toward its prior),
enough to settle a parameter they leave undetermined (overhead, from points at one batch)."""

FIT_SAMPLES = 400
"""Monte Carlo samples per prediction while fitting (stratified and seeded: the objective is
a deterministic, smooth function of the parameters)."""

BOUNDS = {
    "efficiency": (0.005, 3.0),
    "overhead_s": (1e-6, 10.0),
    "straggler_sigma": (1e-3, 1.0),
    "bandwidth_scale": (0.005, 20.0),
}
NAMES = tuple(BOUNDS)


class PointLike(Protocol):
    """A published point (simulator/published.py `PublishedPoint`), read only."""

    @property
    def devices(self) -> int: ...
    @property
    def nodes(self) -> int: ...
    @property
    def batch_per_device(self) -> int: ...
    @property
    def images_per_s(self) -> float | None: ...
    @property
    def efficiency(self) -> float | None: ...


class TableLike(Protocol):
    """A published table (simulator/published.py `PublishedTable`), read only."""

    @property
    def name(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def fit(self) -> Sequence[int]: ...
    @property
    def points(self) -> Sequence[PointLike]: ...
    @property
    def fit_from(self) -> str | None: ...


@dataclass(frozen=True)
class Parameters:
    """The free parameters of one system and model."""

    efficiency: float
    overhead_s: float
    straggler_sigma: float
    bandwidth_scale: float

    def to_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in NAMES}


@dataclass(frozen=True)
class PointFit:
    """One published point, predicted."""

    devices: int
    nodes: int
    batch_per_device: int
    role: str
    """'fit' (the parameters were fitted to it) or 'held out' (predicted)."""
    measure: str
    """'images/s' or 'efficiency': what the source published."""
    published: float
    predicted: float

    @property
    def error(self) -> float:
        """predicted / published - 1."""
        return self.predicted / self.published - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": self.devices,
            "nodes": self.nodes,
            "batch_per_device": self.batch_per_device,
            "role": self.role,
            "measure": self.measure,
            "published": self.published,
            "predicted": self.predicted,
            "error": self.error,
        }


@dataclass(frozen=True)
class TableFit:
    """A table's fitted parameters and every point predicted with them."""

    table: str
    model: str
    cluster: str
    precision: str
    prior: Parameters
    fitted: Parameters
    points: tuple[PointFit, ...]
    notes: tuple[str, ...] = ()

    @property
    def held_out(self) -> list[PointFit]:
        return [p for p in self.points if p.role == "held out"]

    def median_abs_error(self) -> float | None:
        """Median |error| over the held-out points; None when every point was fitted."""
        errors = [abs(p.error) for p in self.held_out]
        return statistics.median(errors) if errors else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "model": self.model,
            "cluster": self.cluster,
            "precision": self.precision,
            "prior": self.prior.to_dict(),
            "fitted": self.fitted.to_dict(),
            "median_abs_error_held_out": self.median_abs_error(),
            "points": [p.to_dict() for p in self.points],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class SystemModel:
    """What predicting a point needs besides the parameters: the model's layout and compute
    from the cluster file, and the cluster."""

    base: Calibration
    layout: GradientLayout
    cluster: ClusterSpec
    samples: int = FIT_SAMPLES
    seed: int = 0

    @property
    def peak_flops_per_sample(self) -> float:
        """Seconds per sample at efficiency 1 (training FLOPs / peak)."""
        return self.base.compute_s_per_sample * (self.cluster.device.efficiency or 1.0)

    def prior(self) -> Parameters:
        return Parameters(
            efficiency=float(self.cluster.device.efficiency or 0.5),
            overhead_s=max(self.base.compute_fixed_s, 1e-4),
            straggler_sigma=max(self.base.straggler_sigma, 1e-3),
            bandwidth_scale=1.0,
        )

    def throughput(self, params: Parameters, devices: int, nodes: int, batch: int) -> float:
        """Predicted images/s of `devices` devices over `nodes` nodes at `batch` each."""
        calibration = replace(
            self.base,
            compute_s_per_sample=self.peak_flops_per_sample / params.efficiency,
            compute_fixed_s=params.overhead_s,
            straggler_sigma=params.straggler_sigma,
        )
        cluster = placed(scaled_links(self.cluster, params.bandwidth_scale), devices, nodes)
        predicted = predict_one(
            calibration,
            self.layout,
            cluster,
            devices,
            batch,
            samples=self.samples,
            seed=self.seed,
            check_fit=False,
        )
        return predicted.samples_per_s

    def predict(self, params: Parameters, point: PointLike) -> tuple[str, float, float]:
        """(measure, published, predicted) for one point."""
        batch, devices, nodes = point.batch_per_device, point.devices, point.nodes
        if point.images_per_s is not None:
            return "images/s", point.images_per_s, self.throughput(params, devices, nodes, batch)
        assert point.efficiency is not None
        one = self.throughput(params, 1, 1, batch)
        scaled = self.throughput(params, devices, nodes, batch)
        return "efficiency", point.efficiency, scaled / (devices * one)


def scaled_links(cluster: ClusterSpec, scale: float) -> ClusterSpec:
    """`cluster` with every link's bandwidth times `scale` (latencies as they are)."""

    def scaled(link: Any) -> Any:
        if link is None:
            return None
        return replace(link, bandwidth_bytes_per_s=link.bandwidth_bytes_per_s * scale)

    return replace(
        cluster,
        intra_node=scaled(cluster.intra_node),
        inter_node=scaled(cluster.inter_node),
        server_bandwidth=None
        if cluster.server_bandwidth is None
        else cluster.server_bandwidth * scale,
    )


def placed(cluster: ClusterSpec, devices: int, nodes: int) -> ClusterSpec:
    """`cluster` laid out as a published point ran: `devices` over `nodes` nodes (a table's
    8 GPUs may be 8 nodes of 1, or one node of 8), with no cap on the node count."""
    if nodes < 1 or devices % nodes:
        raise ConfigError(f"{devices} devices do not split evenly over {nodes} nodes")
    per_node = devices // nodes if nodes > 1 else max(devices, cluster.devices_per_node)
    if nodes > 1 and cluster.inter_node is None:
        raise ConfigError(
            f"cluster {cluster.name!r} has no inter-node link, and a point ran on {nodes} nodes"
        )
    return replace(cluster, devices_per_node=per_node, nodes=None)


def system_model(
    model: str,
    cluster: ClusterSpec,
    precision: str,
    *,
    reference_batch: int,
    samples: int = FIT_SAMPLES,
    seed: int = 0,
) -> SystemModel:
    """The simulator's view of `model` on `cluster` before any fit (the cluster file's peak
    and efficiency; ConfigError in one line if the file lacks them)."""
    layout = cached_layout(model, None)
    base = calibrate_from_peak(
        model,
        cluster.device,
        precision,
        training_flops_per_sample(model, counted=layout.flops_per_sample),
        layout.num_params,
        reference_batch_size=reference_batch,
        ops_per_step=layout.ops_per_step,
        flops_by_kind=layout.flops_by_kind,
    )
    return SystemModel(base=base, layout=layout, cluster=cluster, samples=samples, seed=seed)


def free_parameters(points: Sequence[PointLike]) -> tuple[str, ...]:
    """The parameters `points` can show (see the module's docstring)."""
    free = ["efficiency", "overhead_s"]
    if any(point.devices > 1 for point in points):
        free.append("straggler_sigma")
    if any(point.nodes > 1 for point in points):
        free.append("bandwidth_scale")
    return tuple(free)


def fit_points(
    system: SystemModel, points: Sequence[PointLike], prior: Parameters | None = None
) -> Parameters:
    """The parameters that best reproduce `points` (least squares on log ratios, with the
    weak pull toward `prior`, the cluster file's values by default); those the points
    cannot show keep the prior's value."""
    prior = prior or system.prior()
    free = free_parameters(points)
    if not points:
        return prior
    start = np.log([clip(name, getattr(prior, name)) for name in free])
    low = np.log([BOUNDS[name][0] for name in free])
    high = np.log([BOUNDS[name][1] for name in free])
    centre = np.log([getattr(prior, name) for name in free])

    def params_at(x: np.ndarray) -> Parameters:
        return replace(prior, **{name: float(v) for name, v in zip(free, np.exp(x), strict=True)})

    def residuals(x: np.ndarray) -> np.ndarray:
        params = params_at(x)
        misses = []
        for point in points:
            _, published, predicted = system.predict(params, point)
            misses.append(math.log(predicted / published))
        return np.array([*misses, *(PRIOR_WEIGHT * (x - centre))])

    found = least_squares(residuals, start, bounds=(low, high), diff_step=1e-3)
    return params_at(found.x)


def clip(name: str, value: float) -> float:
    low, high = BOUNDS[name]
    return min(max(value, low), high)


def fit_table(
    table: TableLike,
    cluster: ClusterSpec,
    *,
    fit_devices: Sequence[int] | None = None,
    samples: int = FIT_SAMPLES,
    seed: int = 0,
) -> TableFit:
    """Fit the parameters on the points of `fit_devices` (default: the table's own split)
    and predict every point of `table` on `cluster`."""
    calibrating = table
    fit_from = getattr(table, "fit_from", None)
    if fit_from and not fit_devices:
        # A table of efficiencies is calibrated by the fit points of its source's throughput
        # table (simulator/published.py, `fit_from`).
        calibrating = load_table(fit_from)
    chosen = tuple(fit_devices) if fit_devices else tuple(calibrating.fit)
    known = {point.devices for point in calibrating.points}
    missing = sorted(set(chosen) - known)
    if missing:
        raise ConfigError(
            f"table {table.name} has no point at {missing[0]} devices; its points: "
            f"{', '.join(str(d) for d in sorted(known))}"
        )
    fit_set = [p for p in calibrating.points if p.devices in chosen]
    reference = (fit_set or list(table.points))[0].batch_per_device
    system = system_model(
        table.model,
        cluster,
        table.precision,
        reference_batch=reference,
        samples=samples,
        seed=seed,
    )
    prior = system.prior()
    fitted = fit_points(system, fit_set, prior)
    results = []
    for point in table.points:
        measure, published, predicted = system.predict(fitted, point)
        results.append(
            PointFit(
                devices=point.devices,
                nodes=point.nodes,
                batch_per_device=point.batch_per_device,
                role="fit" if calibrating is table and point.devices in chosen else "held out",
                measure=measure,
                published=published,
                predicted=predicted,
            )
        )
    free = free_parameters(fit_set)
    kept = [name for name in NAMES if name not in free]
    notes = []
    if calibrating is not table:
        notes.append(f"fitted on the points {list(chosen)} of table {calibrating.name}")
    if not fit_set:
        notes.append("no point to fit: every parameter is the cluster file's")
    elif kept:
        notes.append(f"kept from the cluster file (no fit point shows them): {', '.join(kept)}")
    return TableFit(
        table=table.name,
        model=table.model,
        cluster=cluster.name,
        precision=table.precision,
        prior=prior,
        fitted=fitted,
        points=tuple(results),
        notes=tuple(notes),
    )
