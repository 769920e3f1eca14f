"""Every registered workload takes one training step on small synthetic data: serially, and
with 2 gloo workers whose averaged gradients must be the serial step's.

Under DDP each worker computes the mean gradient over its half of the global batch and the
workers average them. A model's batch-dependent parts stay per process: batch-norm
statistics are each worker's own (no SyncBatchNorm) and each process draws its own dropout
masks. So the serial reference takes the same global batch as the same two halves, each
half's loss halved, each half under the dropout seed its worker uses: what one process
computes with two micro-batches of gradient accumulation (train/step.py). And with the
intra-op threads of a worker (one): a different thread count sums in another order, and 44
batch-normalised layers over 4 samples make that a difference of a percent.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from trainscale.config.options import RunConfig
from trainscale.data.tensors import DataRequest, TensorData
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.launcher import launch_workers
from trainscale.parallel.strategy import make_strategy
from trainscale.train.setup import build_model
from trainscale.workloads import get_workload, workload_names
from trainscale.workloads.base import Workload

from tests.helpers.tiny import tiny_config

WORKERS = 2
PER_WORKER = 4
GLOBAL_BATCH = WORKERS * PER_WORKER
DROPOUT_SEED = 100
"""Rank r's forward runs after torch.manual_seed(DROPOUT_SEED + r), here and in the workers."""
SMALL_OPTIONS = {"max_len": "16", "vocab_size": "50", "layers": "32,16"}
"""Workload options that make a model or its inputs small, set where a workload has them."""


def small_config(name: str, workers: int) -> RunConfig:
    """A resolved run of workload `name` on synthetic data, its options made small."""
    options = {k: v for k, v in SMALL_OPTIONS.items() if k in get_workload(name).options}
    return tiny_config(
        workload=name,
        data="synthetic",
        workload_options=options,
        workers=workers,
        global_batch_size=GLOBAL_BATCH,
    )


def small_setup(name: str, workers: int) -> tuple[RunConfig, Workload, TensorData]:
    """The config, the workload and one global batch of its synthetic data."""
    config = small_config(name, workers)
    workload = get_workload(name)
    request = DataRequest(
        options=config.data.workload_options,
        seed=config.optimisation.seed,
        max_train=GLOBAL_BATCH,
        max_test=2,
    )
    return config, workload, workload.make_synthetic(request)


def half_loss(
    model: torch.nn.Module, workload: Workload, x: torch.Tensor, y: torch.Tensor, rank: int
) -> torch.Tensor:
    """The mean loss over rank `rank`'s half of the global batch, under its dropout seed."""
    rows = slice(rank * PER_WORKER, (rank + 1) * PER_WORKER)
    torch.manual_seed(DROPOUT_SEED + rank)
    return workload.loss(model(x[rows]), y[rows])


def gradients(model: torch.nn.Module) -> dict[str, torch.Tensor | None]:
    """Each parameter that requires a gradient, by name: its gradient (None: it got none)."""
    return {
        name: None if p.grad is None else p.grad.detach().clone()
        for name, p in model.named_parameters()
        if p.requires_grad
    }


def assert_all_finite(grads: dict[str, torch.Tensor | None]) -> None:
    assert grads, "the model has no trainable parameters"
    missing = [name for name, grad in grads.items() if grad is None]
    assert not missing, f"parameters without a gradient: {missing}"
    for name, grad in grads.items():
        assert grad is not None and torch.isfinite(grad).all(), f"{name}: non-finite gradient"
    assert any(bool(grad.abs().sum() > 0) for grad in grads.values() if grad is not None)


@contextmanager
def threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to `count` for the block, then restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def two_worker_step(name: str) -> dict[str, Any]:
    """One worker's step under DDP on its half of the global batch (runs in a worker)."""
    config, workload, data = small_setup(name, WORKERS)
    strategy = make_strategy(config, DistEnv.from_environ())
    strategy.setup()
    try:
        model, train_x = build_model(config, workload, data, strategy.device)
        model = strategy.wrap(model)
        model.train()
        loss = half_loss(model, workload, train_x, data.train_y, strategy.env.rank)
        loss.backward()
        return {"loss": loss.item(), "grads": gradients(strategy.unwrap(model))}
    finally:
        strategy.teardown()


@pytest.mark.parametrize("name", workload_names())
def test_one_serial_step_gives_a_finite_loss_and_every_parameter_a_finite_gradient(name):
    config, workload, data = small_setup(name, 1)
    model, train_x = build_model(config, workload, data, torch.device("cpu"))
    model.train()
    assert len(train_x) == GLOBAL_BATCH
    loss = workload.loss(model(train_x), data.train_y)
    assert math.isfinite(loss.item())
    loss.backward()
    assert_all_finite(gradients(model))


@pytest.mark.parametrize("name", workload_names())
def test_two_gloo_workers_average_to_the_serial_gradient_of_the_global_batch(name):
    config, workload, data = small_setup(name, 1)
    model, train_x = build_model(config, workload, data, torch.device("cpu"))
    model.train()
    losses = []
    with threads(small_config(name, WORKERS).parallel.threads_per_worker):
        for rank in range(WORKERS):
            loss = half_loss(model, workload, train_x, data.train_y, rank)
            (loss / WORKERS).backward()  # the mean over the global batch: equal halves
            losses.append(loss.item())
    serial = gradients(model)

    results = launch_workers(two_worker_step, (name,), WORKERS)

    assert set(results) == set(range(WORKERS))
    for rank, result in results.items():
        # Each worker's loss is its own half's: the same forward as the serial one.
        assert result["loss"] == pytest.approx(losses[rank], rel=1e-5, abs=1e-6)
        assert_all_finite(result["grads"])
        assert set(result["grads"]) == set(serial)
        for param, grad in serial.items():
            torch.testing.assert_close(
                result["grads"][param],
                grad,
                rtol=1e-4,
                atol=1e-6,
                msg=lambda m, rank=rank, param=param: f"rank {rank} {param}: {m}",
            )
