"""torch.compile, with compilation triggered on one batch off the clock."""

from __future__ import annotations

import os
import shutil
from typing import cast

import torch

from trainscale.train.warmup import timed_pass
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
    (`warmup.timed_pass`): no weights updated, batch-norm statistics and generators put back.
    """
    # torch.compile of a module returns a module (OptimizedModule), typed as any callable.
    # It shares the model's parameters and buffers: what the pass leaves untouched on one it
    # leaves on the other.
    compiled = cast(torch.nn.Module, torch.compile(model))
    return compiled, timed_pass(compiled, x, y, workload, precision, device)


def inductor_cpu_compiler() -> tuple[str, str | None]:
    """(the C++ compiler TorchInductor uses for CPU kernels, its path or None if absent).

    Inductor runs `$CXX`, else `g++` (torch/_inductor/config.py, `cpp.cxx`).
    """
    name = os.environ.get("CXX") or "g++"
    return name, shutil.which(name)
