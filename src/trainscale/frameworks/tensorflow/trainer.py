"""A run's training in TensorFlow/Keras, under the measurement rules every framework shares.

In order, all before the first timed step except the pre-training phase (which is training):
TensorFlow's threads and tf.distribute strategy (distribute.py), the seeded torch twin of
the model (its FLOPs, and the initial weights copied into the Keras model), the workload's
pre-training (mnist-dbn's CD, on the training clock), torch's per-step lr schedule, the
traced step (its tracing time is the run's compile time). Then the shared loop
(`trainscale.train.trainer.measure_training`) drives the step and evaluates off the clock.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.frameworks.tensorflow.distribute import TfDistribution, setup_distribution
from trainscale.frameworks.tensorflow.evaluate import make_evaluator
from trainscale.frameworks.tensorflow.inputs import model_shape, training_layout
from trainscale.frameworks.tensorflow.optim import torch_schedule
from trainscale.frameworks.tensorflow.pretrain import run_pretraining
from trainscale.frameworks.tensorflow.step import TfStep
from trainscale.frameworks.twin import check_twin
from trainscale.parallel.breadcrumbs import clear_phase, note_phase
from trainscale.parallel.strategy import Strategy
from trainscale.train.batches import WorkerBatches
from trainscale.train.flops import seeded_torch_model
from trainscale.train.plan import plan_steps
from trainscale.train.progress import NullProgress, ProgressSink
from trainscale.train.trainer import SetupFigures, TrainOutcome, measure_training
from trainscale.workloads.base import TENSORFLOW, Workload

MIXED_BF16 = "mixed_bfloat16"
"""Keras's bf16 policy: bf16 compute, float32 variables (torch autocast's split)."""


def train(
    config: RunConfig,
    workload: Workload,
    data: TensorData,
    strategy: Strategy,
    progress: ProgressSink | None = None,
) -> TrainOutcome:
    """Train `workload` on `data` in TensorFlow as `config` says; returns the measurements
    (all ranks), the trained Keras model as `model`."""
    # Quiet TensorFlow's C++ start-up banners unless the user asked for them.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    progress = progress or NullProgress()
    if config.parallel.device != "cpu":
        raise NotImplementedError("the TensorFlow trainer runs on the CPU only so far")
    # Threads and the strategy first: TensorFlow fixes both when its runtime starts.
    distribution = setup_distribution(config, strategy)
    # With --single-process this one process feeds the global batch (split among its
    # replicas); otherwise each process feeds its own shard's per-worker batch.
    feed = config
    if distribution.local_replicas > 1:
        feed = config.with_(batch_size=config.optimisation.global_batch_size)
    plan = plan_steps(feed, data.num_train, strategy.env.world_size)

    torch_model, flops = seeded_torch_model(workload, data, config.optimisation.seed)
    twin = build_keras_model(config, workload, data, torch_model, distribution)
    model = twin.model
    pretraining = run_pretraining(twin, workload, data, strategy, feed, distribution, progress)

    train_x = training_layout(data.train_x)  # once, for the whole in-memory set
    sample = tuple(model_shape(data.train_x[:1]))
    stepper = TfStep(
        config,
        distribution,
        model,
        torch_schedule(config.optimisation, plan.total_steps),
        sample,
        data.train_x.numpy().dtype,
        strategy.env.rank,
    )
    note_phase("tracing the TensorFlow step", "TensorFlow")
    compile_s = stepper.compile()
    # Once, not per step: a collective that times out may end the process from C++.
    note_phase(f"training (TensorFlow's step and collectives, {distribution.label})", "TensorFlow")
    outcome = measure_training(
        config,
        workload,
        data,
        strategy,
        progress,
        stepper,
        plan,
        WorkerBatches(feed, workload, data, train_x, strategy.sharding),
        SetupFigures(flops, pretraining, compile_s),
        evaluator=make_evaluator(data, strategy, stepper.signature[0]),
        replicas=distribution.replicas if distribution.local_replicas > 1 else None,
        facts=distribution.facts,
    )
    clear_phase()
    return outcome


def build_keras_model(
    config: RunConfig,
    workload: Workload,
    data: TensorData,
    torch_model: torch.nn.Module,
    distribution: TfDistribution,
) -> Any:
    """The workload's Keras twin, its model's variables made by the tf.distribute strategy
    (one copy per replica), holding the seeded torch model's weights; in bf16 under Keras's
    mixed policy."""
    import keras

    from trainscale.models.tensorflow import KerasTwin
    from trainscale.models.tensorflow.dropout import seed_dropouts

    previous = keras.mixed_precision.global_policy()
    if config.optimisation.precision == "bf16":
        keras.mixed_precision.set_global_policy(MIXED_BF16)
    try:
        with distribution.strategy.scope():
            twin = workload.build_model(data.meta, TENSORFLOW)
            seed_dropouts(twin.model, config.optimisation.seed)
    finally:
        # The layers keep the policy they were built with; later models start afresh.
        keras.mixed_precision.set_global_policy(previous)
    check_twin(workload, TENSORFLOW, twin, KerasTwin)
    twin.load_torch_weights(torch_model)
    return twin
