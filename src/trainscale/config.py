"""Run configuration: what the user asked for, validated in one place, then resolved.

`RunOptions` holds the user's choices (None = "use the default"). `resolve()` turns them into
a `RunConfig` in which every value is concrete: the workload's recipe filled in, the CPU
plan (workers, threads, cores) decided, batch sizes and learning rate computed. The resolved
config is what runs and what is stored with the result, so a run can be reproduced from it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from trainscale.errors import ConfigError

PRECISIONS = ("fp32", "bf16")
LR_SCALINGS = ("none", "linear", "sqrt")
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "onecycle", "cosine")
DATA_KINDS = ("real", "synthetic")
THREADS_TORCH_DEFAULT = "torch-default"


@dataclass(frozen=True)
class RunOptions:
    """A run as the user asked for it; None means "the workload's or planner's default"."""

    workload: str
    data: str = "real"
    """'real' (files from the data search path) or 'synthetic' (random tensors, same shapes)."""
    data_dir: str | None = None
    """Directory holding the dataset files; searched before TRAINSCALE_DATA_DIR and the cache."""
    download: bool = True
    """Download into the cache (with checksum verification) when no local copy is found."""
    workers: int = 1
    """Worker processes (data parallel over gloo when > 1)."""
    threads_per_worker: int | str | None = None
    """Intra-op threads per worker; None = cores // workers; 'torch-default' leaves torch's."""
    affinity: str = "compact"
    """'none', 'compact', 'spread', or explicit per-worker core lists such as '0,1;2,3'."""
    allow_oversubscribe: bool = False
    """Run even when workers x threads exceeds the cores available (to show the pitfall)."""
    batch_size: int | None = None
    """Per-worker batch size."""
    global_batch_size: int | None = None
    """Global batch size (per-worker x workers); give this or batch_size, not both."""
    optimizer: str | None = None
    lr: float | None = None
    """Peak learning rate at the workload's reference batch size, before lr scaling."""
    lr_scaling: str = "none"
    """How the lr follows the global batch: 'none', 'linear' or 'sqrt'."""
    warmup_fraction: float | None = None
    """Share of steps with linear lr warm-up; defaults to the recipe's (more when lr is scaled)."""
    schedule: str | None = None
    weight_decay: float | None = None
    precision: str = "fp32"
    epochs: float | None = None
    steps: int | None = None
    """Total optimizer steps; overrides epochs when given."""
    eval_every: int | None = None
    """Evaluate every this many steps (off the training clock); default: 4 times per epoch."""
    evaluate: bool = True
    """Evaluate on the test set; False = throughput only, no accuracy reported."""
    target_accuracy: float | None = None
    seed: int = 0
    warmup_steps_untimed: int = 5
    """Measurement warm-up: the first steps are trained but left out of step-time statistics."""
    timeout_s: float = 300.0
    """How long a collective may wait for a silent worker before the run fails."""
    tag: str | None = None
    workload_options: dict[str, str] = field(default_factory=dict)
    """Workload-specific options (`-o KEY=VALUE`), e.g. a data file and its columns."""


@dataclass(frozen=True)
class RunConfig:
    """A fully resolved run: every field concrete. Stored with the result."""

    workload: str
    data: str
    data_dir: str | None
    download: bool
    workers: int
    threads_per_worker: int | None
    """None = not set by trainscale (the 'torch-default' pitfall setting)."""
    affinity: str
    core_sets: list[list[int]] | None
    """Cores each worker is pinned to (index = local rank); None = not pinned."""
    oversubscribed: bool
    batch_size: int
    global_batch_size: int
    optimizer: str
    lr: float
    """Peak lr after scaling to the global batch."""
    base_lr: float
    reference_batch_size: int
    lr_scaling: str
    schedule: str
    warmup_fraction: float
    momentum: float
    weight_decay: float
    label_smoothing: float
    precision: str
    epochs: float
    steps: int | None
    eval_every: int | None
    evaluate: bool
    target_accuracy: float
    seed: int
    warmup_steps_untimed: int
    timeout_s: float
    channels_last: bool
    tag: str | None = None
    workload_options: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def with_(self, **changes: Any) -> RunConfig:
        return replace(self, **changes)


def _positive(name: str, value: float | None, *, integer: bool = False) -> None:
    if value is None:
        return
    if integer and (not isinstance(value, int) or isinstance(value, bool)):
        raise ConfigError(f"--{name} must be a whole number, got {value!r}")
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ConfigError(f"--{name} must be a positive number, got {value!r}")


def _choice(name: str, value: str | None, valid: tuple[str, ...]) -> None:
    if value is not None and value not in valid:
        raise ConfigError(f"--{name} must be one of {', '.join(valid)}; got {value!r}")


def validate_options(opts: RunOptions) -> None:
    """Reject impossible option values with one line naming the option."""
    _choice("data", opts.data, DATA_KINDS)
    _choice("precision", opts.precision, PRECISIONS)
    _choice("lr-scaling", opts.lr_scaling, LR_SCALINGS)
    _choice("optimizer", opts.optimizer, OPTIMIZERS)
    _choice("schedule", opts.schedule, SCHEDULES)
    _positive("workers", opts.workers, integer=True)
    if opts.threads_per_worker != THREADS_TORCH_DEFAULT:
        _positive("threads-per-worker", opts.threads_per_worker, integer=True)
    _positive("batch-size", opts.batch_size, integer=True)
    _positive("global-batch-size", opts.global_batch_size, integer=True)
    _positive("lr", opts.lr)
    _positive("epochs", opts.epochs)
    _positive("steps", opts.steps, integer=True)
    _positive("eval-every", opts.eval_every, integer=True)
    _positive("timeout", opts.timeout_s)
    if opts.batch_size is not None and opts.global_batch_size is not None:
        raise ConfigError("give --batch-size (per worker) or --global-batch-size, not both")
    if opts.global_batch_size is not None and opts.global_batch_size % opts.workers:
        raise ConfigError(
            f"--global-batch-size {opts.global_batch_size} is not divisible by "
            f"--workers {opts.workers}"
        )
    if opts.target_accuracy is not None and not 0 < opts.target_accuracy <= 1:
        raise ConfigError(
            f"--target-accuracy is a fraction in (0, 1], got {opts.target_accuracy!r}"
        )
    if opts.warmup_fraction is not None and not 0 <= opts.warmup_fraction < 1:
        raise ConfigError(f"--warmup-fraction must be in [0, 1), got {opts.warmup_fraction!r}")
    if opts.weight_decay is not None and not (
        math.isfinite(opts.weight_decay) and opts.weight_decay >= 0
    ):
        raise ConfigError(f"--weight-decay must be >= 0, got {opts.weight_decay!r}")
    if opts.warmup_steps_untimed < 0:
        raise ConfigError("--warmup-steps must be >= 0")
    if opts.seed < 0:
        raise ConfigError(f"--seed must be >= 0, got {opts.seed}")


def scaled_lr(base_lr: float, global_batch: int, reference_batch: int, rule: str) -> float:
    """The lr for `global_batch` given one tuned at `reference_batch` (Goyal et al. 2017)."""
    ratio = global_batch / reference_batch
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    return base_lr


def resolve(opts: RunOptions, available_cores: list[int] | None = None) -> RunConfig:
    """Fill every default from the workload's recipe and the CPU planner."""
    from trainscale.parallel.affinity import parse_affinity, plan_cpu
    from trainscale.system import read_numa_nodes
    from trainscale.workloads import get_workload

    validate_options(opts)
    workload = get_workload(opts.workload)
    recipe = workload.recipe
    unknown = sorted(set(opts.workload_options) - set(workload.options))
    if unknown:
        valid = ", ".join(sorted(workload.options)) or "none"
        raise ConfigError(
            f"unknown option {unknown[0]!r} for workload {workload.name}; valid -o options: {valid}"
        )

    torch_default_threads = opts.threads_per_worker == THREADS_TORCH_DEFAULT
    requested_threads = None if torch_default_threads else opts.threads_per_worker
    affinity = parse_affinity(opts.affinity)
    plan = plan_cpu(
        opts.workers,
        requested_threads,
        affinity,
        available_cores=available_cores,
        numa_nodes=[node["cpus"] for node in read_numa_nodes()] or None,
        # Leaving torch's default thread count is only ever asked for to show the pitfall.
        allow_oversubscribe=opts.allow_oversubscribe or torch_default_threads,
    )

    if opts.global_batch_size is not None:
        batch_size = opts.global_batch_size // opts.workers
    else:
        batch_size = opts.batch_size or recipe.batch_size
    global_batch = batch_size * opts.workers
    base_lr = opts.lr if opts.lr is not None else recipe.lr
    lr = scaled_lr(base_lr, global_batch, recipe.batch_size, opts.lr_scaling)
    warmup = opts.warmup_fraction
    if warmup is None:
        warmup = recipe.warmup_fraction
        # A scaled-up lr needs a gradual warm-up to be stable (Goyal et al. 2017).
        if opts.lr_scaling != "none" and global_batch > recipe.batch_size:
            warmup = max(warmup, 0.1)

    return RunConfig(
        workload=workload.name,
        data=opts.data,
        data_dir=opts.data_dir,
        download=opts.download,
        workers=opts.workers,
        threads_per_worker=None if torch_default_threads else plan.threads_per_worker,
        affinity=plan.affinity,
        core_sets=[list(s) for s in plan.core_sets] if plan.core_sets is not None else None,
        oversubscribed=plan.oversubscribed or torch_default_threads,
        batch_size=batch_size,
        global_batch_size=global_batch,
        optimizer=opts.optimizer or recipe.optimizer,
        lr=lr,
        base_lr=base_lr,
        reference_batch_size=recipe.batch_size,
        lr_scaling=opts.lr_scaling,
        schedule=opts.schedule or recipe.schedule,
        warmup_fraction=warmup,
        momentum=recipe.momentum,
        weight_decay=opts.weight_decay if opts.weight_decay is not None else recipe.weight_decay,
        label_smoothing=recipe.label_smoothing,
        precision=opts.precision,
        epochs=opts.epochs if opts.epochs is not None else recipe.epochs,
        steps=opts.steps,
        eval_every=opts.eval_every,
        evaluate=opts.evaluate,
        target_accuracy=(
            opts.target_accuracy if opts.target_accuracy is not None else workload.target_accuracy
        ),
        seed=opts.seed,
        warmup_steps_untimed=opts.warmup_steps_untimed,
        timeout_s=opts.timeout_s,
        channels_last=workload.channels_last,
        tag=opts.tag,
        workload_options=dict(opts.workload_options),
    )


def data_request(config: RunConfig) -> Any:
    """What the workload's data functions are asked for, from a resolved config."""
    from pathlib import Path

    from trainscale.workloads.base import DataRequest

    return DataRequest(
        data_dir=Path(config.data_dir) if config.data_dir else None,
        download=config.download,
        options=dict(config.workload_options),
        seed=config.seed,
    )
