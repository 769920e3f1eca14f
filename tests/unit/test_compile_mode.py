"""torch.compile's mode: passed through, CUDA graphs set up off the clock, steps marked."""

from __future__ import annotations

import logging

import pytest
import torch

from trainscale.config.options import RunOptions
from trainscale.data.tensors import DataRequest
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.runner.resolve import resolve
from trainscale.train import compile as compile_module
from trainscale.train.compile import (
    CUDA_GRAPH_PASSES,
    DYNAMO_CONTEXT_LOGGER,
    compile_model,
    mark_cuda_graph_step,
)
from trainscale.train.loss import run_loss
from trainscale.train.trainer import train
from trainscale.workloads import get_workload

from tests.helpers.tiny import NormDropNet, tiny_config, tiny_data, tiny_workload


@pytest.fixture
def recorded(monkeypatch):
    """torch.compile, the warm-up pass and CUDA graph step marks, recorded, not run: the
    passes a mode takes are checked without a GPU (torch.device('cuda') needs none)."""
    calls: dict[str, list] = {"compile": [], "passes": [], "marks": []}

    def fake_compile(model, **kwargs):
        calls["compile"].append(kwargs)
        return model

    def fake_pass(model, x, y, loss_fn, precision, device):
        calls["passes"].append(device.type)
        return 0.25

    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(compile_module, "timed_pass", fake_pass)
    monkeypatch.setattr(
        torch.compiler, "cudagraph_mark_step_begin", lambda: calls["marks"].append(1)
    )
    return calls


def _compile(device: str, mode: str) -> float:
    data = tiny_data()
    _, _, seconds = compile_model(
        NormDropNet(),
        run_loss(tiny_workload()),
        data.train_x[:8],
        data.train_y[:8],
        "fp32",
        torch.device(device),
        mode,
    )
    return seconds


def test_the_default_mode_is_torch_compiles_own_and_takes_one_pass(recorded):
    assert _compile("cuda", "default") == pytest.approx(0.25)
    assert recorded["compile"] == [{"mode": None}] * 2, "the model and the loss"
    assert recorded["passes"] == ["cuda"] and recorded["marks"] == []


def test_a_cuda_graph_mode_records_its_graphs_off_the_clock(recorded):
    # PyTorch records a graph on a call after the first: one pass would leave the
    # recording to the first timed steps.
    assert _compile("cuda", "reduce-overhead") == pytest.approx(0.25 * CUDA_GRAPH_PASSES)
    assert recorded["compile"] == [{"mode": "reduce-overhead"}] * 2
    assert len(recorded["passes"]) == CUDA_GRAPH_PASSES >= 2
    assert len(recorded["marks"]) == CUDA_GRAPH_PASSES


def test_on_a_cpu_a_cuda_graph_mode_compiles_once_without_marks(recorded):
    assert _compile("cpu", "reduce-overhead") == pytest.approx(0.25)
    assert recorded["compile"] == [{"mode": "reduce-overhead"}] * 2
    assert recorded["marks"] == []


@pytest.mark.parametrize(
    ("device", "mode", "marked"),
    [
        ("cuda", "reduce-overhead", True),
        ("cuda", "max-autotune", True),
        ("cuda", "default", False),
        ("cpu", "reduce-overhead", False),
    ],
)
def test_each_step_is_marked_only_where_graphs_replay(recorded, device, mode, marked):
    mark_cuda_graph_step(mode, torch.device(device))
    assert recorded["marks"] == ([1] if marked else [])


def test_the_mode_is_resolved_and_stored(monkeypatch):
    # Whether this machine has a C++ compiler for a CPU compile is another test's concern.
    monkeypatch.setattr("trainscale.runner.resolve.check_cpu_compiler", lambda: None)
    plain = resolve(RunOptions.of(workload="mnist-cnn", compile=True), available_cores=[0, 1])
    graphs = resolve(
        RunOptions.of(workload="mnist-cnn", compile=True, compile_mode="reduce-overhead"),
        available_cores=[0, 1],
    )
    assert plain.optimisation.compile_mode == "default"
    assert graphs.optimisation.compile_mode == "reduce-overhead"
    assert graphs.flat()["compile_mode"] == "reduce-overhead"
    assert graphs.settings_hash() != plain.settings_hash(), "the mode shapes the run"


def _train_mnist_cnn(compile_: bool) -> list[float]:
    config = tiny_config(
        data="synthetic", steps=4, global_batch_size=8, evaluate=False, compile=compile_
    ).with_(label_smoothing=0.1)
    spec = get_workload("mnist-cnn")
    data = spec.make_synthetic(DataRequest(seed=0, max_train=64, max_test=8))
    outcome = train(config, spec, data, make_strategy(config, DistEnv()))
    return [row["train_loss"] for row in outcome.epochs]


def test_under_compile_every_step_computes_its_loss_through_the_compiled_loss(monkeypatch):
    # Compiled for real by Dynamo with its eager backend (no C++ build in a unit test). On a
    # launch-bound GPU step the loss's ~20 kernels are left outside a CUDA-graph mode's
    # graphs unless the loss is compiled too.
    monkeypatch.setattr("trainscale.runner.resolve.check_cpu_compiler", lambda: None)
    compile_ = torch.compile
    loss_calls: list[int] = []

    def compile_counting_loss_calls(fn, **kwargs):
        compiled = compile_(fn, backend="eager", **kwargs)
        if isinstance(fn, torch.nn.Module):
            return compiled

        def counted(*args):
            loss_calls.append(1)
            return compiled(*args)

        return counted

    eager = _train_mnist_cnn(compile_=False)
    monkeypatch.setattr(torch, "compile", compile_counting_loss_calls)
    compiled = _train_mnist_cnn(compile_=True)
    # One compilation pass, then the 4 steps (a CPU run takes no warm-up step).
    assert len(loss_calls) == 1 + 4
    assert compiled == pytest.approx(eager, rel=1e-6), "the same loss, label smoothing kept"


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord(DYNAMO_CONTEXT_LOGGER, logging.WARNING, __file__, 1, message, (), None)


def test_compiling_drops_dynamos_ignored_annotation_notice_and_nothing_else(recorded):
    # DDP's forward carries a profiler annotation Dynamo cannot keep; its notice was
    # printed by every worker of a data-parallel --compile run.
    _compile("cpu", "default")
    logger = logging.getLogger(DYNAMO_CONTEXT_LOGGER)
    notice = "Profiler record function %s will be ignored"
    assert not logger.filter(_record(notice))
    assert logger.filter(_record("Graph break in user code"))
    _compile("cpu", "default")
    assert len(logger.filters) == len(set(map(id, logger.filters))), "added once"
