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
from trainscale.parallel.rendezvous import DEFAULT_RDZV_TIMEOUT_S

PRECISIONS = ("fp32", "bf16", "fp16")
DEVICES = ("cpu", "cuda", "auto")
LR_SCALINGS = ("none", "linear", "sqrt")
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "onecycle", "cosine", "step")
DATA_KINDS = ("real", "synthetic")
THREADS_TORCH_DEFAULT = "torch-default"
_NOT_SETTINGS = ("tag", "rdzv_endpoint", "rdzv_id", "rdzv_timeout_s")
"""RunConfig fields that label or launch a run without changing how it trains."""


@dataclass(frozen=True)
class RunOptions:
    """A run as the user asked for it; None means "the workload's or planner's default"."""

    workload: str
    data: str = "real"
    """'real' (files from the data search path) or 'synthetic' (random tensors, same shapes)."""
    data_dir: str | None = None
    """Directory holding the dataset files; when given, the only place looked in (no fallback
    to TRAINSCALE_DATA_DIR or the cache)."""
    download: bool = True
    """Download into the cache (with checksum verification) when no local copy is found."""
    device: str = "cpu"
    """'cpu', 'cuda' (one GPU per worker) or 'auto' (cuda when a GPU is visible)."""
    workers: int = 1
    """Worker processes (data parallel when > 1: gloo on the CPU, NCCL on GPUs)."""
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
    compile: bool = False
    """Compile the model with torch.compile before training (compilation is off the clock)."""
    bucket_cap_mb: float | None = None
    """DDP gradient bucket size in MiB (torch's default, 25, when None)."""
    grad_accum: int = 1
    """Micro-batches per optimizer step; all but the last skip the all-reduce (no_sync)."""
    breakdown_every: int = 25
    """Record the step-time breakdown on every this-many-th step after warm-up; 0 = never."""
    nnodes: int = 1
    """Nodes (machines) in the job; each runs `workers` processes. World size = nnodes x workers."""
    rdzv_endpoint: str | None = None
    """HOST:PORT where the nodes meet (c10d rendezvous); required when nnodes > 1."""
    rdzv_id: str | None = None
    """Id shared by the nodes of one job; default under SLURM: slurm-JOB-STEP."""
    rdzv_timeout_s: float = DEFAULT_RDZV_TIMEOUT_S
    """How long a node waits for the endpoint and for the other nodes to join."""


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
    device: str = "cpu"
    """'cpu' or 'cuda' (resolved from 'auto')."""
    compile: bool = False
    bucket_cap_mb: float | None = None
    grad_accum: int = 1
    breakdown_every: int = 25
    nesterov: bool = True
    nnodes: int = 1
    """Nodes in the job; `workers` is the processes on each. Only global rank 0 stores."""
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    rdzv_timeout_s: float | None = None
    """Rendezvous of a multi-node job (None on one node); how nodes met, not how they trained."""

    @property
    def world_size(self) -> int:
        """Worker processes over all nodes."""
        return self.nnodes * self.workers

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def with_(self, **changes: Any) -> RunConfig:
        return replace(self, **changes)

    def settings_hash(self) -> str:
        """A short hash of every setting that shapes the run (the tag is a label, not one).

        Two runs with equal hashes trained the same way: sweeps match repeats and resumed
        runs by it.
        """
        import hashlib
        import json

        settings = {k: v for k, v in self.to_dict().items() if k not in _NOT_SETTINGS}
        if settings.get("nnodes") == 1:  # one node hashes as it did before nnodes existed
            del settings["nnodes"]
        text = json.dumps(settings, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


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
    _choice("device", opts.device, DEVICES)
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
    _positive("grad-accum", opts.grad_accum, integer=True)
    _positive("bucket-cap-mb", opts.bucket_cap_mb)
    if opts.breakdown_every < 0:
        raise ConfigError(f"--breakdown-every must be >= 0, got {opts.breakdown_every}")
    if opts.batch_size is not None and opts.global_batch_size is not None:
        raise ConfigError("give --batch-size (per worker) or --global-batch-size, not both")
    _positive("nnodes", opts.nnodes, integer=True)
    _positive("rdzv-timeout", opts.rdzv_timeout_s)
    _validate_rendezvous(opts)
    world = opts.workers * opts.nnodes
    if opts.global_batch_size is not None and opts.global_batch_size % world:
        across = f" x --nnodes {opts.nnodes}" if opts.nnodes > 1 else ""
        raise ConfigError(
            f"--global-batch-size {opts.global_batch_size} is not divisible by "
            f"--workers {opts.workers}{across}"
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


def _validate_rendezvous(opts: RunOptions) -> None:
    """A multi-node job needs an endpoint every node can reach and an id they share."""
    import os

    from trainscale.parallel.distenv import launched_externally
    from trainscale.parallel.rendezvous import check_job_id, default_job_id, parse_endpoint

    if opts.rdzv_endpoint is not None:
        parse_endpoint(opts.rdzv_endpoint)
    if opts.rdzv_id is not None:
        check_job_id(opts.rdzv_id)
    if opts.nnodes == 1 or launched_externally():
        return  # one node, or torchrun/srun already formed the job
    if opts.rdzv_endpoint is None:
        raise ConfigError(
            f"--nnodes {opts.nnodes} needs --rdzv-endpoint HOST:PORT, an address of one of "
            "the nodes that every node can reach (the same on every node)"
        )
    if opts.rdzv_id is None and default_job_id(os.environ) is None:
        raise ConfigError(
            f"--nnodes {opts.nnodes} needs --rdzv-id ID, the same on every node of this job "
            "(under SLURM it defaults to the job and step id)"
        )


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
    if workload.check_options is not None:
        workload.check_options(opts.workload_options)

    device = resolve_device(opts.device, opts.workers)
    if opts.precision == "fp16" and device != "cuda":
        raise ConfigError(
            "--precision fp16 needs --device cuda (CPUs have no fast fp16 matrix units; "
            "use bf16 on the CPU)"
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
    _check_worker_count(opts.workers, len(plan.available_cores))

    if opts.global_batch_size is not None:
        batch_size = opts.global_batch_size // (opts.workers * opts.nnodes)
    else:
        batch_size = opts.batch_size or recipe.batch_size
    if batch_size % opts.grad_accum:
        raise ConfigError(
            f"--grad-accum {opts.grad_accum} does not divide the per-worker batch {batch_size} "
            "into equal micro-batches"
        )
    global_batch = batch_size * opts.workers * opts.nnodes
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
        nesterov=recipe.nesterov,
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
        device=device,
        compile=opts.compile,
        bucket_cap_mb=opts.bucket_cap_mb,
        grad_accum=opts.grad_accum,
        breakdown_every=opts.breakdown_every,
        **_resolve_rendezvous(opts),
    )


def _check_worker_count(workers: int, num_cores: int) -> None:
    """Refuse more worker processes than this machine can start (resources.py), even where
    oversubscription is allowed. Under an external launcher the processes already exist:
    starting them was the launcher's business."""
    from trainscale.parallel.distenv import launched_externally
    from trainscale.resources import check_worker_count, open_file_limit

    if not launched_externally():
        check_worker_count(workers, num_cores, open_file_limit())


def _resolve_rendezvous(opts: RunOptions) -> dict[str, Any]:
    """The rendezvous fields of a RunConfig: None on one node (it meets itself on 127.0.0.1,
    whatever rendezvous options were given, so one script serves any --nnodes)."""
    import os

    from trainscale.parallel.rendezvous import default_job_id

    if opts.nnodes == 1:
        return {"nnodes": 1}
    return {
        "nnodes": opts.nnodes,
        "rdzv_endpoint": opts.rdzv_endpoint.strip() if opts.rdzv_endpoint else None,
        "rdzv_id": opts.rdzv_id or default_job_id(os.environ),
        "rdzv_timeout_s": opts.rdzv_timeout_s,
    }


def resolve_device(requested: str, workers: int) -> str:
    """'cpu' or 'cuda' for `requested`, checking that the GPUs asked for are there."""
    if requested == "cpu":
        return "cpu"
    import os

    import torch

    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "auto":
        return "cuda" if available else "cpu"
    if not available:
        raise ConfigError(
            "--device cuda, but no CUDA GPU is visible to torch "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
            "use --device cpu"
        )
    # Under an external launcher the workers of this node are LOCAL_WORLD_SIZE, not all.
    local = int(os.environ.get("LOCAL_WORLD_SIZE", workers))
    if local > available:
        raise ConfigError(
            f"{local} GPU workers on this machine but only {available} GPU(s) visible; "
            f"use --workers {available} or fewer (one process per GPU)"
        )
    return "cuda"


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
