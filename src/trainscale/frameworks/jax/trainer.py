"""The JAX trainer: a workload's flax twin trained data-parallel with jax.distributed, under
the measurement rules every framework shares (trainscale.train.trainer.measure_training).

Order of work, all before the first step unless said:
1. XLA's backend is configured (threads, host devices) and, with several processes, the
   processes join jax.distributed (distribute.py). No jax operation runs before this.
2. The seeded torch twin is built; FLOPs are counted on it; its weights are copied into
   the flax model (the same start as PyTorch's).
3. Image sets are converted to NHWC once; the pre-training phase runs (on the clock).
4. The optimizer's per-step hyper-parameters come from torch's scheduler (optim.py); the
   step is compiled for the first batch (off the clock, `compile_s`).
5. The shared loop drives the step (step.py) and evaluates with evaluate.py.

Replicas: one per process (--workers N: N processes, jax.distributed) or, with
--single-process, N host devices in one process, which then takes the global batch from the
whole training set (each device a replica's share of it).
"""

from __future__ import annotations

from typing import Any

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.errors import ConfigError
from trainscale.frameworks.jax.distribute import (
    Distribution,
    configure_backend,
    join,
    pool_threads,
)
from trainscale.frameworks.twin import check_twin
from trainscale.parallel.breadcrumbs import clear_phase, note_phase
from trainscale.parallel.strategy import Strategy
from trainscale.train.batches import WorkerBatches
from trainscale.train.flops import seeded_torch_model
from trainscale.train.plan import plan_steps
from trainscale.train.progress import NullProgress, ProgressSink
from trainscale.train.trainer import SetupFigures, TrainOutcome, measure_training
from trainscale.workloads.base import JAX, Workload


def train(
    config: RunConfig,
    workload: Workload,
    data: TensorData,
    strategy: Strategy,
    progress: ProgressSink | None = None,
) -> TrainOutcome:
    """Train `workload` on `data` in JAX as `config` says; returns measurements (all ranks)."""
    if config.optimisation.precision == "fp16":
        raise ConfigError("--precision fp16 is not available with --framework jax; use bf16")
    # Before any jax operation: threads and devices are fixed then.
    configure_backend(config, strategy.env.local_rank)
    distribution = join(config, strategy)
    try:
        outcome = _train(config, workload, data, strategy, progress or NullProgress(), distribution)
    except BaseException:
        distribution.abandon()  # the others wait on this process: leave at once
        raise
    distribution.shutdown()
    clear_phase()
    return outcome


def _train(
    config: RunConfig,
    workload: Workload,
    data: TensorData,
    strategy: Strategy,
    progress: ProgressSink,
    distribution: Distribution,
) -> TrainOutcome:
    import jax.numpy as jnp

    from trainscale.frameworks.jax.evaluate import JaxEvaluator
    from trainscale.frameworks.jax.inputs import (
        for_nhwc,
        host_batch,
        host_labels,
        is_token_set,
        to_nhwc,
    )
    from trainscale.frameworks.jax.optim import make_optax, torch_schedule
    from trainscale.frameworks.jax.pretrain import run_pretraining
    from trainscale.frameworks.jax.step import JaxStep
    from trainscale.models.jax import FlaxTwin

    opt = config.optimisation
    # A process's rows of each step: its worker's batch, or every replica's in one process.
    local_batch = opt.global_batch_size // distribution.processes
    local_config = config if local_batch == opt.batch_size else config.with_(batch_size=local_batch)
    plan = plan_steps(local_config, data.num_train, distribution.processes)

    torch_model, flops = seeded_torch_model(workload, data, opt.seed)

    train_x, test_x = to_nhwc(data.train_x), to_nhwc(data.test_x)
    dtype = jnp.bfloat16 if opt.precision == "bf16" else jnp.float32
    twin = workload.build_model(data.meta, JAX)
    check_twin(workload, JAX, twin, FlaxTwin)
    module = twin.module(dtype)
    variables = twin.variables_from_torch(module, torch_model, host_batch(train_x[:2]))
    variables, pretraining = run_pretraining(
        config, workload, twin, data, variables, strategy, distribution, local_batch, progress
    )

    full_width = int(train_x.shape[1]) if is_token_set(train_x) else None
    facts: dict[str, Any] = {
        "jax_threads": pool_threads(),
        "jax_distribution": distribution.description,
        # Where JAX computes ('gpu: NVIDIA H100 80GB HBM3', 'cpu: cpu'): the run's device is
        # what was asked; this is what JAX's backend gave.
        "jax_device": _device_name(distribution),
    }
    stepper = JaxStep(
        module,
        variables,
        make_optax(opt, torch_schedule(opt, plan.total_steps)),
        distribution,
        strategy,
        global_batch=opt.global_batch_size,
        full_width=full_width,
        label_smoothing=opt.label_smoothing,
        seed=opt.seed,
        facts=facts,
    )
    batches = WorkerBatches(local_config, for_nhwc(workload), data, train_x, strategy.sharding)
    first = batches.epoch_order(0)[:local_batch]
    x = train_x[first]
    note_phase("compiling the JAX step", "XLA")
    compile_s = strategy.max_float(
        stepper.compile_for(host_batch(x, stepper.width_for(x)), host_labels(data.train_y[first]))
    )
    # Once, not per step: a timed-out collective aborts the process from C++.
    note_phase(f"training (JAX's step and collectives, {distribution.description})", "XLA")
    return measure_training(
        config,
        workload,
        data,
        strategy,
        progress,
        stepper,
        plan,
        batches,
        SetupFigures(flops, pretraining, compile_s),
        evaluator=JaxEvaluator(test_x, data.test_y, strategy),
        replicas=distribution.replicas if config.parallel.single_process else None,
        facts=facts,
    )


def _device_name(distribution: Distribution) -> str:
    """'platform: kind' of the first device on the run's mesh."""
    device = distribution.mesh.devices.flat[0]
    return f"{device.platform}: {device.device_kind}"
