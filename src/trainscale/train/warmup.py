"""A GPU's one-off start-up costs, paid before the first step and timed apart.

The first forward and backward on a CUDA device pay costs no later step pays: cuDNN and
cuBLAS load their kernel libraries (lazily, from disk), cuDNN autotunes each convolution
shape (`cudnn.benchmark`), and the caching allocator grows. On an H200 the first evaluation
interval of an mnist-cnn run (10 or 180 steps of 3 ms) took 0.35 to 1.95 s longer than the
next one, varying from run to run: a third to half of a 1-second time to target. So a CUDA
run takes one forward and backward of a training micro-batch before its first step, off the
clock, and stores its time as `device_warmup_s` (as `--compile` stores its compilation).
The pass leaves no trace (`untouched`): training then starts from the state it would have
had without it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from trainscale.train.precision import autocast
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


def warm_up_device(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    workload: Workload,
    precision: str,
    device: torch.device,
) -> float | None:
    """The warm-up pass's seconds on CUDA (`timed_pass`); None elsewhere: a CPU run takes no
    such pass, its one-off costs (thread pools, oneDNN kernels) being small beside a step."""
    if device.type != "cuda":
        return None
    return timed_pass(model, x, y, workload, precision, device)
