"""What the simulator reads of a stored run: whether it measured a step time, its device,
the cores and batch of one worker, its step's breakdown and spread."""

from __future__ import annotations

from trainscale.metrics.throughput import stored_step_time
from trainscale.results.records import RunRecord
from trainscale.simulator.stragglers import sigma_from_spread

MODELLED_FRAMEWORK = "pytorch"


def is_emulation(record: RunRecord) -> bool:
    """Whether a stored run is an accuracy emulation (one process standing in for N)."""
    return record.is_emulation


def has_step_time(record: RunRecord) -> bool:
    """A completed training run with a measured step time (not an emulation), in any
    framework."""
    median = record.figures.step_time_s_median
    return (
        record.status == "completed"
        and not is_emulation(record)
        and median is not None
        and median > 0
    )


def is_measured(record: RunRecord) -> bool:
    """A run the simulator can calibrate from or predict: `has_step_time`, trained in
    PyTorch. Its model is DDP's step (bucketed ring all-reduce overlapping backward); a
    TensorFlow or JAX step is another program, whose time would blend into the fit."""
    return has_step_time(record) and record.framework == MODELLED_FRAMEWORK


def unmodelled_framework(record: RunRecord) -> str | None:
    """Why `record`'s framework is not the simulator's (a skip reason), or None."""
    if record.framework == MODELLED_FRAMEWORK:
        return None
    return f"a {record.framework} run (the simulator models PyTorch DDP's step; docs/simulator.md)"


def device_kind(record: RunRecord) -> str:
    return record.settings.device


def device_name(record: RunRecord) -> str:
    """The CPU model, or the first GPU's name for a CUDA run."""
    if device_kind(record) == "cuda":
        return record.machine.gpu_name or "GPU"
    return record.machine.cpu_model or "cpu"


def usable_cores(record: RunRecord) -> int:
    return record.machine.cores or 1


def cores_per_worker(record: RunRecord) -> tuple[int, bool]:
    """(cores one worker computes on, whether the run oversubscribed its cores).

    A pinned worker has its core set; unpinned workers share the machine's usable cores.
    A worker computes on no more cores than it has threads.
    """
    settings = record.settings
    workers = int(record.world_size or settings.workers or 1)
    threads = int(record.threads_per_worker or settings.threads_per_worker or 1)
    core_sets = settings.core_sets
    if core_sets:
        own = len(core_sets[0])
        total_cores = len({c for s in core_sets for c in s})
    else:
        total_cores = usable_cores(record)
        own = max(1, total_cores // workers)
    oversubscribed = settings.oversubscribed or workers * threads > total_cores
    return max(1, min(threads, own)), oversubscribed


def run_breakdown(record: RunRecord) -> dict[str, float] | None:
    """A run's step split into data, forward, backward and optimizer (seconds), adding up to
    its rated step time (`stored_step_time`); None without a recorded breakdown."""
    parts = record.figures.breakdown_s
    values: dict[str, float] = {}
    for key in ("data", "forward", "backward", "optimizer"):
        value = parts.get(key)
        if value is None or value < 0:
            return None
        values[key] = value
    total = sum(values.values())
    if total <= 0:
        return None
    scale = stored_step_time(record.summary) / total
    return {k: float(v) * scale for k, v in values.items()}


def run_sigma(record: RunRecord) -> float | None:
    """Lognormal sigma of a run's step times, from its median and IQR."""
    median, iqr = record.figures.step_time_s_median, record.figures.step_time_s_iqr
    if median is None or iqr is None or median <= 0:
        return None
    return sigma_from_spread(median, max(0.0, iqr))


def per_worker_batch(record: RunRecord) -> int:
    """A worker's batch: the config's, or for a script run (which decides its own) the
    measured global batch split over its workers."""
    batch = record.settings.batch_size
    if batch or not record.settings.script:
        return int(batch or record.global_batch_size or 1)
    workers = max(1, int(record.world_size or 1))
    return max(1, round((record.global_batch_size or 1) / workers))
