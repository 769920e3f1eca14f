"""A GPU's one-off start-up costs, paid before the first step and timed apart.

The first time a CUDA process launches a kernel it pays for loading it (CUDA loads modules
lazily), and cuDNN and cuBLAS load their libraries and autotune each convolution shape
(`cudnn.benchmark`); the caching allocator grows. On an H200 the first evaluation interval of
an mnist-cnn run (10 or 180 steps of 3 ms) took 0.35 to 1.95 s longer than the next one. A
forward and backward alone was not enough: profiled (`--profile`), the first step still took
164 ms against 4 ms for the tenth, in kernels no warm-up pass had launched: the loss with
label smoothing (104 ms), the optimizer step, the divergence watch, the batch's gather.

So a CUDA run takes one step of its own training before the clock starts
(`TrainStep.warm_up`): the first batch drawn and augmented, forward, the run's loss,
backward (and under DDP the all-reduce), the optimizer and schedule steps, the loss kept,
all as the loop will do them, then everything put back (`training_untouched`): the
parameters, buffers and gradients, the optimizer's state and learning rate, the schedule's
position, the augmentation's and the global random generators. Its time is stored as
`device_warmup_s` (as `--compile` stores its compilation); it holds one copy of the
parameters and buffers while it runs, and the peak memory figure starts after it. A workload
with a pre-training phase, which is on the clock, first takes a forward and backward
(`timed_pass`), so the libraries' start-up is not paid there.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from trainscale.train.loss import LossFn
from trainscale.train.precision import autocast


def warms_up(device: torch.device) -> bool:
    """Whether a run on `device` takes the warm-up passes: on CUDA only. A CPU run's one-off
    costs (thread pools, oneDNN kernels) are small beside a step."""
    return device.type == "cuda"


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
    loss_fn: LossFn,
    precision: str,
    device: torch.device,
) -> float:
    """Seconds of one forward and backward of (`x`, `y`) through `model` and `loss_fn` under
    the run's precision, waited for on a GPU, leaving no trace (`untouched`)."""
    t0 = time.perf_counter()
    with untouched(model, device):
        with autocast(device, precision):
            loss = loss_fn(model(x), y)
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return time.perf_counter() - t0


@contextmanager
def training_untouched(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    generators: Sequence[torch.Generator],
    device: torch.device,
) -> Iterator[None]:
    """A block of training steps that leaves no trace: the model's parameters and buffers
    (copied once, on their device), its gradients, the optimizer's state and learning rates,
    the schedule's position, `generators` and the global random generators are as they were
    when it ends, however it ends."""
    saved = {name: value.detach().clone() for name, value in model.state_dict().items()}
    optimizer_state = copy.deepcopy(optimizer.state_dict())
    schedule_state = copy.deepcopy(scheduler.state_dict())
    generator_states = [generator.get_state() for generator in generators]
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            yield
    finally:
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            for name, value in model.state_dict().items():
                value.copy_(saved[name])
        optimizer.load_state_dict(optimizer_state)
        scheduler.load_state_dict(schedule_state)
        for generator, state in zip(generators, generator_states, strict=True):
            generator.set_state(state)


def restart_peak_memory(device: torch.device) -> None:
    """Restart the device's peak memory figure after the warm-up, so it counts training
    alone: the warm-up's copy of the parameters is freed by then (`training_untouched`
    drops it as its block ends)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
