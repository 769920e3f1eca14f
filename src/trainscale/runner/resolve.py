"""From what the user asked (RunOptions) to what runs (RunConfig), checked before launch.

This is the only place before launch that reads the machine: its cores and NUMA nodes (the
CPU plan), its GPUs, the launcher's environment, where the dataset is and how much memory
is free. Everything a user can get wrong fails here in one line, before any worker starts:
a run that cannot fit is refused, not stored as failed.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal

import torch

from trainscale.config.cli import given_flags
from trainscale.config.options import (
    THREADS_TORCH_DEFAULT,
    DataOptions,
    MeasurementOptions,
    NodeOptions,
    OptimisationConfig,
    ParallelConfig,
    ParallelOptions,
    RunConfig,
    RunOptions,
)
from trainscale.config.suggest import did_you_mean
from trainscale.data.tensors import DataRequest, DataSize, Located
from trainscale.errors import ConfigError
from trainscale.frameworks import FRAMEWORKS, get_framework, require
from trainscale.hardware import resources
from trainscale.hardware.facts import read_numa_nodes
from trainscale.hardware.precision_choice import choose_precision
from trainscale.hardware.resources import check_worker_count
from trainscale.parallel.affinity import CpuPlan, parse_affinity, plan_cpu
from trainscale.parallel.distenv import launched_externally
from trainscale.parallel.rendezvous import check_job_id, default_job_id, parse_endpoint
from trainscale.runner.footprint import check_run_memory, estimate_footprint
from trainscale.train.compile import inductor_cpu_compiler
from trainscale.train.lr import scaled_lr
from trainscale.train.plan import check_batch_fits
from trainscale.workloads import get_workload, workload_source
from trainscale.workloads.base import Workload


def resolve(opts: RunOptions, available_cores: list[int] | None = None) -> RunConfig:
    """Fill every default from the workload's recipe and the CPU planner."""
    check_rendezvous(opts.nodes)
    workload = get_workload(opts.workload)
    _check_workload_options(workload, opts.data.workload_options)
    par, opt = opts.parallel, opts.optimisation
    device = resolve_device(par.device, par.workers)
    if par.device == "auto" and device == "cuda" and get_framework(par.framework).gpu_reason():
        device = "cpu"  # auto: the best device the framework can train on here
    check_framework(opts, device)
    _check_framework_model(workload, par.framework)
    if opt.precision == "fp16" and device != "cuda":
        raise ConfigError(
            "--precision fp16 needs --device cuda (CPUs have no fast fp16 matrix units; "
            "use bf16 on the CPU)"
        )

    parallel = resolve_parallel(par, device, workload.channels_last, available_cores)
    measurement = opts.measurement
    if measurement.target_accuracy is None:
        measurement = MeasurementOptions(
            **{**measurement.__dict__, "target_accuracy": workload.target_accuracy}
        )
    return RunConfig(
        workload=workload.name,
        data=DataOptions(
            kind=opts.data.kind,
            data_dir=opts.data.data_dir,
            download=opts.data.download,
            workload_options=dict(opts.data.workload_options),
        ),
        parallel=parallel,
        optimisation=_resolve_optimisation(opts, workload, device),
        measurement=measurement,
        nodes=_resolve_nodes(opts.nodes),
        tag=opts.tag,
        workload_source=workload_source(workload.name),
    )


def resolve_parallel(
    par: ParallelOptions,
    device: Literal["cpu", "cuda"],
    channels_last: bool,
    available_cores: list[int] | None = None,
) -> ParallelConfig:
    """The CPU plan of a run's workers (cores, threads, oversubscription), checked; a script
    run's too (runner/script_launch.py)."""
    torch_default_threads = par.threads_per_worker == THREADS_TORCH_DEFAULT
    requested_threads = None if torch_default_threads else par.threads_per_worker
    plan = plan_cpu(
        par.workers,
        requested_threads,  # type: ignore[arg-type]
        parse_affinity(par.affinity),
        available_cores=available_cores,
        numa_nodes=[node["cpus"] for node in read_numa_nodes()] or None,
        # Leaving torch's default thread count is only ever asked for to show the pitfall.
        allow_oversubscribe=par.allow_oversubscribe or torch_default_threads,
    )
    _check_worker_count(par.workers, len(plan.available_cores))
    over = plan.oversubscribed or (
        torch_default_threads and _torch_default_oversubscribes(plan, par.workers)
    )
    return ParallelConfig(
        device=device,
        workers=par.workers,
        threads_per_worker=None if torch_default_threads else plan.threads_per_worker,
        affinity=plan.affinity,
        core_sets=[list(s) for s in plan.core_sets] if plan.core_sets is not None else None,
        oversubscribed=over,
        timeout_s=par.timeout_s,
        bucket_cap_mb=par.bucket_cap_mb,
        grad_accum=par.grad_accum,
        channels_last=channels_last,
        framework=par.framework,
        single_process=par.single_process,
    )


def _torch_default_oversubscribes(plan: CpuPlan, workers: int) -> bool:
    """Whether workers left at torch's default thread count run more threads than their
    cores: the default here (its cores, or OMP_NUM_THREADS) is what a worker starts with.
    With OMP_NUM_THREADS=1 the naive setting is 1 thread a worker, not oversubscribed."""
    default = torch.get_num_threads()
    if plan.core_sets is not None:
        return any(default > len(cores) for cores in plan.core_sets)
    return workers * default > len(plan.available_cores)


def check_framework(opts: RunOptions, device: str) -> None:
    """Refuse, in one line, a framework that is not installed or a setting it does not have."""
    par = opts.parallel
    framework = get_framework(par.framework)
    label = framework.label
    if par.single_process and not framework.single_process:
        able = " or ".join(f.name for f in FRAMEWORKS.values() if f.single_process)
        raise ConfigError(
            f"--single-process needs --framework {able} ({label} data parallelism is one "
            f"process per worker: {framework.data_parallelism})"
        )
    if par.single_process and (par.workers < 2 or opts.nodes.nnodes > 1):
        raise ConfigError(
            "--single-process puts --workers N > 1 replicas in one process, on one node"
        )
    for key, why in framework.refused_settings.items():
        for flag in given_flags(opts, (key,)):
            raise ConfigError(f"{flag} is a PyTorch setting, not {label}'s: {why}")
    if opts.optimisation.compile and device == "cpu":
        check_cpu_compiler()
    require(framework.name)
    if device != "cuda":
        return
    if not framework.cuda:
        on_gpus = " or ".join(f.name for f in FRAMEWORKS.values() if f.cuda)
        raise ConfigError(
            f"--device cuda with --framework {framework.name}: this version trains {label} on "
            f"the CPU only (docs/frameworks.md); on GPUs use --framework {on_gpus}"
        )
    missing_backend = framework.gpu_reason()
    if missing_backend:
        raise ConfigError(f"--device cuda with --framework {framework.name}: {missing_backend}")
    if par.single_process:
        raise ConfigError(
            f"--single-process with --device cuda: {label} on GPUs is one process per GPU "
            "(--workers N without --single-process)"
        )
    if opts.optimisation.precision == "fp16" and not framework.fp16:
        raise ConfigError(
            f"--precision fp16 is not available with --framework {framework.name}; use bf16"
        )


def _check_framework_model(workload: Workload, framework: str) -> None:
    """A framework trains the workloads that name a model builder for it (`Workload.models`:
    the built-in ones name all three; a user's workload the ones it declares)."""
    if framework not in workload.models:
        raise ConfigError(
            f"workload {workload.name!r} has no {framework} model, only "
            f"{', '.join(workload.frameworks)} (docs/frameworks.md)"
        )


def _check_workload_options(workload: Workload, values: dict[str, str] | Any) -> None:
    unknown = sorted(set(values) - set(workload.options))
    if unknown:
        valid = ", ".join(sorted(workload.options)) or "none"
        raise ConfigError(
            f"unknown option {unknown[0]!r} for workload {workload.name}"
            f"{did_you_mean(unknown[0], workload.options)}; valid -o options: {valid}"
        )
    if workload.check_options is not None:
        workload.check_options(values)


def _resolve_optimisation(opts: RunOptions, workload: Workload, device: str) -> OptimisationConfig:
    """Batch sizes, lr, schedule and precision from the options and the workload's recipe."""
    opt, recipe = opts.optimisation, workload.recipe
    workers, nnodes = opts.parallel.workers, opts.nodes.nnodes
    if opt.global_batch_size is not None:
        batch_size = opt.global_batch_size // (workers * nnodes)
    else:
        batch_size = opt.batch_size or recipe.batch_size
    grad_accum = opts.parallel.grad_accum
    if batch_size % grad_accum:
        raise ConfigError(
            f"--grad-accum {grad_accum} does not divide the per-worker batch {batch_size} "
            "into equal micro-batches"
        )
    global_batch = batch_size * workers * nnodes
    base_lr = opt.lr if opt.lr is not None else recipe.lr
    warmup = opt.warmup_fraction
    if warmup is None:
        warmup = recipe.warmup_fraction
        # A scaled-up lr needs a gradual warm-up to be stable (Goyal et al. 2017).
        if opt.lr_scaling != "none" and global_batch > recipe.batch_size:
            warmup = max(warmup, 0.1)
    lr = scaled_lr(base_lr, global_batch, recipe.batch_size, opt.lr_scaling)
    if not math.isfinite(lr):
        raise ConfigError(
            f"--lr {base_lr:g} scaled ({opt.lr_scaling}) to global batch {global_batch} is not "
            "a finite number; give a smaller --lr"
        )
    auto_fp32 = get_framework(opts.parallel.framework).auto_fp32.get(device)
    choice = choose_precision(opt.precision, device, fp32_reason=auto_fp32)
    reason = choice.reason
    if workload.recurrent_in_fp32(opts.parallel.framework, device, choice.precision):
        # The stored precision must say what computed: cuDNN's RNNs stay in fp32 here.
        reason += (
            "; the recurrent layers compute in fp32 (under bf16 autocast cuDNN would run "
            "them in fp16, without loss scaling)"
        )
    return OptimisationConfig(
        batch_size=batch_size,
        global_batch_size=global_batch,
        optimizer=opt.optimizer or recipe.optimizer,  # type: ignore[arg-type]
        lr=lr,
        base_lr=base_lr,
        reference_batch_size=recipe.batch_size,
        lr_scaling=opt.lr_scaling,
        schedule=opt.schedule or recipe.schedule,  # type: ignore[arg-type]
        warmup_fraction=warmup,
        momentum=recipe.momentum,
        nesterov=recipe.nesterov,
        weight_decay=opt.weight_decay if opt.weight_decay is not None else recipe.weight_decay,
        label_smoothing=recipe.label_smoothing,
        precision=choice.precision,
        compile=opt.compile,
        compile_mode=opt.compile_mode,
        epochs=opt.epochs if opt.epochs is not None else recipe.epochs,
        steps=opt.steps,
        seed=opt.seed,
        precision_reason=reason,
    )


def check_rendezvous(nodes: NodeOptions) -> None:
    """A multi-node job needs an endpoint every node can reach and an id they share."""
    if nodes.rdzv_endpoint is not None:
        parse_endpoint(nodes.rdzv_endpoint)
    if nodes.rdzv_id is not None:
        check_job_id(nodes.rdzv_id)
    if nodes.nnodes == 1 or launched_externally():
        return  # one node, or torchrun/srun already formed the job
    if nodes.rdzv_endpoint is None:
        raise ConfigError(
            f"--nnodes {nodes.nnodes} needs --rdzv-endpoint HOST:PORT, an address of one of "
            "the nodes that every node can reach (the same on every node)"
        )
    if nodes.rdzv_id is None and default_job_id(os.environ) is None:
        raise ConfigError(
            f"--nnodes {nodes.nnodes} needs --rdzv-id ID, the same on every node of this job "
            "(under SLURM it defaults to the job and step id)"
        )


def _resolve_nodes(nodes: NodeOptions) -> NodeOptions:
    """The rendezvous of the resolved run: none on one node (it meets itself on 127.0.0.1,
    whatever rendezvous options were given, so one script serves any --nnodes)."""
    if nodes.nnodes == 1:
        return NodeOptions(nnodes=1, rdzv_endpoint=None, rdzv_id=None, rdzv_timeout_s=None)
    return NodeOptions(
        nnodes=nodes.nnodes,
        rdzv_endpoint=nodes.rdzv_endpoint.strip() if nodes.rdzv_endpoint else None,
        rdzv_id=nodes.rdzv_id or default_job_id(os.environ),
        rdzv_timeout_s=nodes.rdzv_timeout_s,
    )


def _check_worker_count(workers: int, num_cores: int) -> None:
    """Refuse more worker processes than this machine can start (hardware/resources.py),
    even where oversubscription is allowed. Under an external launcher the processes
    already exist: starting them was the launcher's business."""
    if not launched_externally():
        check_worker_count(workers, num_cores, resources.open_file_limit())


def resolve_device(requested: str, workers: int) -> Literal["cpu", "cuda"]:
    """'cpu' or 'cuda' for `requested`, checking that the GPUs asked for are there."""
    if requested == "cpu":
        return "cpu"

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


def data_request(config: RunConfig) -> DataRequest:
    """What the workload's data functions are asked for, from a resolved config."""
    data = config.data
    return DataRequest(
        data_dir=Path(data.data_dir) if data.data_dir else None,
        download=data.download,
        options=dict(data.workload_options),
        seed=config.optimisation.seed,
    )


# -- data and capacity ------------------------------------------------------------------------


def prepare(opts: RunOptions, located: dict[tuple[Any, ...], Located] | None = None) -> RunConfig:
    """Resolve options, make sure the data is there (downloading it if allowed), and check
    that the run fits: a worker's shard holds a batch, and this machine's memory holds the
    workers. Raises TrainscaleError (one line) before any worker starts.

    `located` caches where each distinct data request was found: locating reads the files
    in full (to fail early on a corrupt one), and a sweep over one dataset pays that once.
    """
    config, size = locate_data(resolve(opts), located)
    check_capacity(config, size)
    make_profile_dir(config.measurement.profile)
    return config


def make_profile_dir(directory: str | None) -> None:
    """Create `--profile`'s directory now, so a path that cannot be one fails in one line
    before any worker starts rather than in every worker after training."""
    if directory is None:
        return
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(
            f"--profile {directory}: cannot make it a directory ({error.strerror or error})"
        ) from None


def check_cpu_compiler() -> None:
    """`--compile` on the CPU builds C++ kernels (TorchInductor) with $CXX, else g++: say so
    in one line when there is none, before any worker starts and fails in the compiler."""
    name, path = inductor_cpu_compiler()
    if path is None:
        raise ConfigError(
            f"--compile on the CPU needs a C++ compiler: TorchInductor builds its kernels with "
            f"{name!r} ($CXX, else g++), which is not on PATH; install one (g++ or clang++) "
            "and set CXX to it, or drop --compile"
        )


def batch_split(config: RunConfig) -> str:
    """How the global batch is split: 'global batch 128 = 2 workers x 64 per worker'."""
    opt, workers, nnodes = config.optimisation, config.parallel.workers, config.nodes.nnodes
    nodes = f"{nnodes} nodes x " if nnodes > 1 else ""
    plural = "s" if workers != 1 else ""
    return (
        f"global batch {opt.global_batch_size} = {nodes}{workers} worker{plural} x "
        f"{opt.batch_size} per worker"
    )


def precision_line(config: RunConfig) -> str:
    """The precision a run trains in and why: 'precision bf16 (auto: this CPU ...)'."""
    opt = config.optimisation
    reason = f" ({opt.precision_reason})" if opt.precision_reason else ""
    return f"precision {opt.precision}{reason}"


def locate_data(
    config: RunConfig, located: dict[tuple[Any, ...], Located] | None = None
) -> tuple[RunConfig, DataSize]:
    """(the config reading from where the data was found, the dataset's size).

    Real data is located (and checked) as `prepare` does; synthetic data has the size its
    workload declares.
    """
    workload = get_workload(config.workload)
    data = config.data
    if data.kind != "real":
        if workload.synthetic_size is None:  # a workload spec's omission, not a user's
            raise ValueError(f"workload {workload.name} declares no synthetic_size")
        return config, workload.synthetic_size
    key = (
        config.workload,
        data.data_dir,
        data.download,
        tuple(sorted(data.workload_options.items())),
    )
    if located is None:
        located = {}
    if key not in located:
        located[key] = workload.locate_real(data_request(config))
    found = located[key]
    # Workers read from where the parent found the files: no second search or download.
    return config.with_(data_dir=str(found.path)), found.size


def check_capacity(config: RunConfig, size: DataSize, batch_advice: str | None = None) -> None:
    """ConfigError unless a worker's shard of `size` holds one batch and this node's memory
    holds the workers (data, model state, processes). The memory check is left out under an
    external launcher: the workers already exist and already hold their share.
    `batch_advice` replaces the batch error's advice (for commands without --batch-size)."""
    check_batch_fits(
        config.optimisation.batch_size, size.num_train, config.world_size, batch_advice
    )
    if not launched_externally():
        footprint = estimate_footprint(
            get_workload(config.workload),
            config.data.workload_options,
            size,
            config.optimisation.seed,
        )
        check_run_memory(config, footprint)
