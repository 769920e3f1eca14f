"""What a run sets up before its first step: the model (seeded, on its device, in its memory
format), the FLOP count, the device warm-up, the pre-training phase, the DDP wrap and
compilation."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.metrics.flops import FlopCount
from trainscale.parallel.strategy import Strategy
from trainscale.train.compile import compile_model
from trainscale.train.flops import count_flops, flops_batch
from trainscale.train.loss import LossFn, run_loss
from trainscale.train.progress import ProgressSink
from trainscale.train.warmup import timed_pass, warms_up
from trainscale.workloads.base import Workload


@dataclass(frozen=True)
class Pretraining:
    """A workload's pre-training phase as it ran: its time (on the training clock) and the
    figures it reported."""

    seconds: float
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass
class PreparedModel:
    """The model ready for its first step, and what was measured on the way."""

    model: nn.Module
    """Wrapped by the strategy (DDP) and compiled as the config says."""
    train_x: torch.Tensor
    """The training inputs in the model's memory format."""
    flops: FlopCount | None
    """Training FLOPs per sample, in all and by operator kind; None where not counted."""
    pretraining: Pretraining | None
    compile_s: float | None
    loss: LossFn
    """The step's loss (the workload's, with the run's label smoothing), compiled where the
    model is."""
    device_warmup_s: float | None = None
    """The GPU warm-up pass before pre-training (train/warmup.py), off the clock; None where
    none ran."""


def build_model(
    config: RunConfig, workload: Workload, data: TensorData, device: torch.device
) -> tuple[nn.Module, torch.Tensor]:
    """The workload's model, built from the run's seed on `device`, and the training inputs
    in the model's memory format."""
    torch.manual_seed(config.optimisation.seed)
    model = workload.build_model(data.meta).to(device)
    train_x = data.train_x
    if config.parallel.channels_last and train_x.dim() == 4:
        # Once for the whole in-memory set; batches are gathered with advanced indexing,
        # which keeps the layout.
        model = model.to(memory_format=torch.channels_last)
        train_x = train_x.contiguous(memory_format=torch.channels_last)
    return model, train_x


def seed_worker_draws(seed: int, rank: int) -> None:
    """Give rank `rank` its own stream for the training's random draws (dropout masks).

    Every rank builds the model from the run's seed (`build_model`) and so holds the same
    global generator state after it: without a reseed, each of N workers would draw the
    same masks, N copies of B / N draws where one worker's batch of B draws B. Rank 0 keeps
    the run's stream, so a serial run draws as before; every other rank reseeds from
    (seed, rank) through numpy's SeedSequence, which makes independent seeds of such tuples.
    """
    if rank > 0:
        entropy = np.random.SeedSequence([seed, rank]).generate_state(1, np.uint64)[0]
        torch.manual_seed(int(entropy))  # the CPU and every CUDA device's generator


def wants_cudnn_benchmark(workload: Workload, device: torch.device) -> bool:
    """Whether the run should let cuDNN autotune its convolutions: on CUDA, for workloads
    whose batches all have one shape (`Workload.fixed_shapes`)."""
    return device.type == "cuda" and workload.fixed_shapes


def configure_cudnn(workload: Workload, device: torch.device) -> None:
    """Set `torch.backends.cudnn.benchmark` for this run on CUDA (both ways, so a setting
    left by an earlier run in the same process does not carry over); no-op elsewhere."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = wants_cudnn_benchmark(workload, device)


def run_pretraining(
    model: nn.Module,
    workload: Workload,
    data: TensorData,
    strategy: Strategy,
    config: RunConfig,
    progress: ProgressSink,
) -> Pretraining | None:
    """The workload's pre-training phase, timed (slowest rank); None when it has none."""
    if workload.pretrain is None:
        return None
    t0 = time.perf_counter()
    figures = workload.pretrain(model, data, strategy, config, progress)
    if strategy.device.type == "cuda":
        torch.cuda.synchronize(strategy.device)
    return Pretraining(strategy.max_float(time.perf_counter() - t0), figures)


def prepare_model(
    config: RunConfig,
    workload: Workload,
    data: TensorData,
    strategy: Strategy,
    progress: ProgressSink,
) -> PreparedModel:
    """Build, count, warm up (CUDA), pre-train, wrap and compile the model, in that order
    (all before any timed step; pre-training is on the training clock, the rest off it)."""
    device = strategy.device
    configure_cudnn(workload, device)
    model, train_x = build_model(config, workload, data, device)
    flops = count_flops(model, *flops_batch(workload, data, train_x), workload)
    precision = config.optimisation.precision
    loss = run_loss(workload, config.optimisation.label_smoothing)
    # The warm-up and compilation passes take one micro-batch, the shape a step's forward
    # sees (compiling another would recompile on the clock).
    micro = config.optimisation.batch_size // config.parallel.grad_accum
    warmup_s = None
    if workload.pretrain is not None and warms_up(device):
        # The pre-training phase is on the clock: the libraries' start-up is paid before it
        # (the whole training step is warmed up later, TrainStep.warm_up).
        passed = timed_pass(model, train_x[:micro], data.train_y[:micro], loss, precision, device)
        warmup_s = strategy.max_float(passed)
    # Before the DDP wrap: the phase averages its own updates across ranks, and DDP then
    # starts every replica from rank 0's (identical) pre-trained weights.
    pretraining = run_pretraining(model, workload, data, strategy, config, progress)
    model = strategy.wrap(model)
    seed_worker_draws(config.optimisation.seed, strategy.env.rank)
    compile_s = None
    if config.optimisation.compile:
        model, loss, compile_s = compile_model(
            model,
            loss,
            train_x[:micro],
            data.train_y[:micro],
            precision,
            device,
            config.optimisation.compile_mode,
        )
    return PreparedModel(model, train_x, flops, pretraining, compile_s, loss, warmup_s)
