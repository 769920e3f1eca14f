"""torch.compile, with compilation triggered on one batch off the clock."""

from __future__ import annotations

import os
import shutil
import time
from typing import cast

import torch

from trainscale.train.precision import autocast
from trainscale.train.warmup import untouched
from trainscale.workloads.base import Workload


def compile_model(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    workload: Workload,
    precision: str,
    device: torch.device,
) -> tuple[torch.nn.Module, float]:
    """torch.compile the model and trigger compilation on one batch, off the clock.

    Returns (compiled model, compile seconds). The warm-up forward/backward leaves no trace
    (`warmup.untouched`): no weights updated, batch-norm statistics and generators put back.
    """
    compiled = torch.compile(model)
    t0 = time.perf_counter()
    with untouched(model, device):
        with autocast(device, precision):
            loss = workload.loss(compiled(x), y)
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    seconds = time.perf_counter() - t0
    # torch.compile of a module returns a module (OptimizedModule), typed as any callable.
    return cast(torch.nn.Module, compiled), seconds


def inductor_cpu_compiler() -> tuple[str, str | None]:
    """(the C++ compiler TorchInductor uses for CPU kernels, its path or None if absent).

    Inductor runs `$CXX`, else `g++` (torch/_inductor/config.py, `cpp.cxx`).
    """
    name = os.environ.get("CXX") or "g++"
    return name, shutil.which(name)
