"""torch.compile of a step's model and loss, with compilation triggered on one batch off the
clock."""

from __future__ import annotations

import logging
import os
import shutil
from typing import cast

import torch

from trainscale.train.loss import LossFn
from trainscale.train.warmup import timed_pass


def compile_model(
    model: torch.nn.Module,
    loss: LossFn,
    x: torch.Tensor,
    y: torch.Tensor,
    precision: str,
    device: torch.device,
    mode: str = "default",
) -> tuple[torch.nn.Module, LossFn, float]:
    """torch.compile the model and the step's loss in `mode` and trigger compilation on one
    batch, off the clock.

    Returns (compiled model, compiled loss, compile seconds). The loss is compiled too
    because on a launch-bound GPU step its operators cost as much as the model's: profiled on
    an H200, cross-entropy with label smoothing issued about 20 kernels forward and backward
    (0.8 ms of a 4 ms mnist-cnn step) that a CUDA-graph mode left outside its graphs. It is
    compiled apart from the model, not into one module with it, so that a DDP-wrapped model
    compiles as PyTorch documents (`torch.compile(ddp_model)`).

    The warm-up forward/backward passes leave no trace (`warmup.timed_pass`): no weights
    updated, batch-norm statistics and generators put back. A mode that replays CUDA graphs
    takes them a few passes to set up (PyTorch records a graph on a call after the first),
    so it gets `CUDA_GRAPH_PASSES` passes: the recording stays off the clock too.
    """
    torch_mode = None if mode == "default" else mode
    quiet_profiler_annotation_notice()
    # torch.compile of a module returns a module (OptimizedModule), typed as any callable.
    # It shares the model's parameters and buffers: what the pass leaves untouched on one it
    # leaves on the other.
    compiled = cast(torch.nn.Module, torch.compile(model, mode=torch_mode))
    compiled_loss = cast(LossFn, torch.compile(loss, mode=torch_mode))
    passes = CUDA_GRAPH_PASSES if replays_cuda_graphs(mode, device) else 1
    seconds = 0.0
    for _ in range(passes):
        mark_cuda_graph_step(mode, device)
        seconds += timed_pass(compiled, x, y, compiled_loss, precision, device)
    return compiled, compiled_loss, seconds


DYNAMO_CONTEXT_LOGGER = "torch._dynamo.variables.ctx_manager"
"""The logger Dynamo tells through that it drops a profiler annotation it traces."""


class _ProfilerAnnotationNotice(logging.Filter):
    """Drops Dynamo's notice that a traced `record_function` annotation will be ignored.

    DDP's forward carries one ("DistributedDataParallel.forward"), so every data-parallel
    `--compile` run printed a warning per worker that the user can do nothing about: only
    the profiler's label of that span is lost inside the compiled region. Every other
    message of the logger passes. Written here because PyTorch offers no switch for this one
    notice short of silencing Dynamo's warnings altogether."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Profiler record function")


_NOTICE_FILTER = _ProfilerAnnotationNotice()


def quiet_profiler_annotation_notice() -> None:
    """Keep Dynamo's ignored-annotation notice out of a compiled run's output (once per
    process: the filter is added once)."""
    logger = logging.getLogger(DYNAMO_CONTEXT_LOGGER)
    if _NOTICE_FILTER not in logger.filters:
        logger.addFilter(_NOTICE_FILTER)


CUDA_GRAPH_PASSES = 3
"""Passes before a CUDA-graph mode's first timed step: PyTorch's CUDA graph trees run a
function once to warm it up and record its graph on a later call; then it replays."""


def replays_cuda_graphs(mode: str, device: torch.device) -> bool:
    """Whether torch.compile in `mode` replays CUDA graphs on `device` (its modes that do,
    on a GPU; on a CPU inductor compiles every mode without graphs)."""
    return device.type == "cuda" and mode in ("reduce-overhead", "max-autotune")


def mark_cuda_graph_step(mode: str, device: torch.device) -> None:
    """Tell PyTorch's CUDA graph trees that a new step begins, where the mode replays them.

    Without it PyTorch infers step boundaries from the calls it sees; a step's outputs are
    then only safe until the next replay, which an evaluation between steps may be. Marking
    each step makes the boundary explicit (torch.compiler.cudagraph_mark_step_begin).
    """
    if replays_cuda_graphs(mode, device):
        torch.compiler.cudagraph_mark_step_begin()


def inductor_cpu_compiler() -> tuple[str, str | None]:
    """(the C++ compiler TorchInductor uses for CPU kernels, its path or None if absent).

    Inductor runs `$CXX`, else `g++` (torch/_inductor/config.py, `cpp.cxx`).
    """
    name = os.environ.get("CXX") or "g++"
    return name, shutil.which(name)
