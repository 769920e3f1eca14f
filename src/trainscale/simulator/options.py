"""What the simulator's commands can be asked, declared once: each field is an option whose
docstring is its `--help` text (config/cli.py makes the flags from them).

`simulate` and `predict-time-to-accuracy` share the step model (the cluster, and how a step
on it is calibrated) and the Monte Carlo; `simulate`'s scaling question adds the worker
counts and the batch. Every value a user can get wrong is refused in one line naming its
flag when the options are made, before any store or cluster file is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainscale.config.limits import (
    DEFAULT_MONTE_CARLO_SAMPLES,
    MAX_BUCKET_CAP_MB,
    MAX_MONTE_CARLO_SAMPLES,
    MAX_SEED,
    check_count,
)
from trainscale.config.options import Device, PrecisionRequest, option
from trainscale.errors import ConfigError
from trainscale.simulator.collectives import Algorithm

WORKER_COUNTS = "whole numbers >= 1 separated by commas, like 1,2,4,8"


def worker_counts(text: str) -> tuple[int, ...]:
    """'1,2,4,8' -> (1, 2, 4, 8); ValueError (the line argparse shows) for anything else."""
    items = [item.strip() for item in text.split(",")]
    if not all(item.isdigit() and int(item) >= 1 for item in items):
        raise ValueError(f"takes {WORKER_COUNTS}; got {text!r}")
    return tuple(int(item) for item in items)


def _at_least_one(flag: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{flag} must be at least 1, got {value}")


@dataclass(frozen=True, kw_only=True)
class StepModelOptions:
    """step model: the cluster predicted on, and how a step on it is calibrated and
    modelled."""

    cluster: str | None = option(None, metavar="PRESET|FILE")
    """a preset (`trainscale simulate --list-clusters`), a cluster TOML file, or 'local'
    (default: local)"""
    nodes: int | None = option(None, metavar="N")
    """nodes of the cluster, >= 1 (default: the cluster file's, else as many as the workers
    need); needs an inter-node link for N > 1"""
    calibrate_from: tuple[str, ...] = option((), metavar="RUN_ID", many=True)
    """stored runs to calibrate from: serial runs give compute, multi-worker runs an
    effective network (default: the matching serial runs in the store)"""
    precision: PrecisionRequest = option("fp32")
    """precision of the predicted training: compute is calibrated from stored runs in it, or
    from a cluster file's peak for it (auto, a run's choice for this machine, is not
    available here)"""
    device: Device | None = option(None)
    """with --cluster local: the device kind (default: cuda where a GPU is visible)"""
    threads_per_worker: int | None = option(None, metavar="T")
    """with --cluster local on a CPU: cores per worker, >= 1 (default: as in the newest
    stored serial run of the workload on this machine, else 1)"""
    algorithm: Algorithm | None = option(None)
    """gradient exchange (default: the cluster file's, else ring)"""
    straggler_sigma: float | None = option(None, metavar="S")
    """lognormal spread of a worker's compute time, in [0, 5) (default: from the runs)"""

    def __post_init__(self) -> None:
        _at_least_one("--nodes", self.nodes)
        _at_least_one("--threads-per-worker", self.threads_per_worker)
        sigma = self.straggler_sigma
        if sigma is not None and not 0 <= sigma < 5:
            raise ConfigError(f"--straggler-sigma must be in [0, 5), got {sigma}")
        # A single run id given from Python is a run id, not its characters.
        if isinstance(self.calibrate_from, str):
            object.__setattr__(self, "calibrate_from", (self.calibrate_from,))


@dataclass(frozen=True, kw_only=True)
class ScalingOptions:
    """scaling: the worker counts to predict and the batch each step takes."""

    workers: tuple[int, ...] | None = option(None, metavar="N,N,...", parse=worker_counts)
    """worker counts to predict, each >= 1 (default: powers of two up to the cluster's
    devices)"""
    batch_size: int | None = option(None, metavar="B", exclusive="batch")
    """per-worker batch, >= 1, kept as workers grow (default: the calibration runs')"""
    global_batch_size: int | None = option(None, metavar="B", exclusive="batch")
    """global batch, >= 1, split over the workers (strong scaling)"""
    bucket_cap_mb: float | None = option(None, metavar="MB")
    """DDP bucket size in MiB, > 0 (default: torch's 25, first bucket 1)"""

    def __post_init__(self) -> None:
        if self.workers is not None:
            counts = tuple(self.workers)
            if not counts or any(
                not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in counts
            ):
                shown = ",".join(map(str, counts)) or "none"
                raise ConfigError(f"--workers takes {WORKER_COUNTS}; got {shown}")
            object.__setattr__(self, "workers", tuple(sorted(set(counts))))
        _at_least_one("--batch-size", self.batch_size)
        _at_least_one("--global-batch-size", self.global_batch_size)
        if self.batch_size is not None and self.global_batch_size is not None:
            raise ConfigError("give --batch-size or --global-batch-size, not both")
        if self.bucket_cap_mb is not None and not 0 < self.bucket_cap_mb <= MAX_BUCKET_CAP_MB:
            raise ConfigError(
                f"--bucket-cap-mb must be positive and at most {MAX_BUCKET_CAP_MB:,} (a TiB), "
                f"got {self.bucket_cap_mb}"
            )


@dataclass(frozen=True, kw_only=True)
class MonteCarloOptions:
    """Monte Carlo: the sampled stragglers behind each prediction."""

    samples: int = option(DEFAULT_MONTE_CARLO_SAMPLES, metavar="N")
    """Monte Carlo samples per prediction, 1 to 100,000"""
    seed: int = option(0)
    """Monte Carlo seed"""

    def __post_init__(self) -> None:
        check_count(
            "--samples",
            self.samples,
            1,
            MAX_MONTE_CARLO_SAMPLES,
            "the stratified samples' quantiles are within 1/samples already",
        )
        check_count("--seed", self.seed, 0, MAX_SEED, "a generator's seed")
