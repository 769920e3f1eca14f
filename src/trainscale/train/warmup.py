"""A GPU's one-off start-up costs, paid before the first step and timed apart.

The first time a CUDA process launches a kernel it pays for loading it (CUDA loads modules
lazily), and cuDNN and cuBLAS load their libraries and autotune each convolution shape
(`cudnn.benchmark`); the caching allocator grows. On an H200 the first evaluation interval of
an mnist-cnn run (10 or 180 steps of 3 ms) took 0.35 to 1.95 s longer than the next one. A
forward and backward alone was not enough: profiled (`--profile`), the first step still took
164 ms against 4 ms for the tenth, in kernels no warm-up pass had launched: the loss with
label smoothing (104 ms), the optimizer step, the divergence watch, the batch's gather.

So a CUDA run first takes one whole training step on a throwaway copy of the model, with a
throwaway optimizer, schedule and loss scaler: the batch gathered and augmented as the loop
does it, the run's loss, backward, the optimizer and schedule steps, the loss kept (for the
epoch's mean and the divergence check). It is off the clock, stored as `device_warmup_s` (as
`--compile` stores its compilation), and leaves no trace: the model, its gradients and the
random number generators are as they were, and the peak memory figure starts after it.
"""

from __future__ import annotations

import copy
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from trainscale.config.options import RunConfig
from trainscale.parallel.strategy import Strategy
from trainscale.train.divergence import StepLosses
from trainscale.train.lr import make_optimisation
from trainscale.train.precision import autocast, make_grad_scaler
from trainscale.workloads.base import Workload


@contextmanager
def untouched(model: torch.nn.Module, device: torch.device) -> Iterator[None]:
    """Run a pass over `model` that leaves no trace: its buffers (batch-norm running
    statistics, step counters), its gradients and the random number generators (dropout
    draws) are as they were when the block ends, however it ends."""
    buffers = [b.detach().clone() for b in model.buffers()]
    devices = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            for buffer, saved in zip(model.buffers(), buffers, strict=True):
                buffer.copy_(saved)


def timed_pass(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    workload: Workload,
    precision: str,
    device: torch.device,
) -> float:
    """Seconds of one forward and backward of (`x`, `y`) under the run's precision, waited
    for on a GPU, leaving no trace (`untouched`)."""
    t0 = time.perf_counter()
    with untouched(model, device):
        with autocast(device, precision):
            loss = workload.loss(model(x), y)
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def warm_up_step(
    model: torch.nn.Module,
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    workload: Workload,
    config: RunConfig,
    strategy: Strategy,
) -> float:
    """Seconds of one whole training step on a throwaway copy of `model`, waited for on a
    GPU: every kernel a step of the run launches is launched once (module docstring).

    It mirrors `TrainStep.step` and the loop's per-step work, not calls them: those carry the
    run's own optimizer, the DDP wrap, the breakdown's marks and fault injection, none of
    which a pass that must leave no trace may touch (tests/unit/test_warmup.py checks that
    the operators it runs cover a real step's).
    """
    device = strategy.device
    opt = config.optimisation
    micro = opt.batch_size // config.parallel.grad_accum
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        spare = copy.deepcopy(model)
        optimizer, scheduler = make_optimisation(spare, config, 2, fused=device.type == "cuda")
        scaler = make_grad_scaler(device, opt.precision)
        # The slice and gather `WorkerBatches.batch` does, on an epoch order's first rows.
        rows = torch.arange(len(train_x), device=train_x.device)[:micro]
        x, y = train_x[rows], train_y[rows]
        if workload.augment is not None:
            x = workload.augment(x, torch.Generator(device=x.device).manual_seed(0))
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, opt.precision):
            loss = workload.loss(spare(x), y, opt.label_smoothing)
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        scheduler.step()
        StepLosses(strategy, 1).add(loss.detach().float())
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def warm_up_device(
    model: torch.nn.Module,
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    workload: Workload,
    config: RunConfig,
    strategy: Strategy,
) -> float | None:
    """The warm-up step's seconds on CUDA (`warm_up_step`); None elsewhere: a CPU run takes
    no such step, its one-off costs (thread pools, oneDNN kernels) being small beside a step.
    """
    if strategy.device.type != "cuda":
        return None
    seconds = warm_up_step(model, train_x, train_y, workload, config, strategy)
    # The copy, its gradients and optimizer state are garbage now, some in reference cycles
    # (optimizer and schedule); collected, so the run's peak memory counts training alone.
    gc.collect()
    torch.cuda.reset_peak_memory_stats(strategy.device)
    return seconds
