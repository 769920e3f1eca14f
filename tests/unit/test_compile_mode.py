"""torch.compile's mode: passed through, CUDA graphs set up off the clock, steps marked."""

from __future__ import annotations

import pytest
import torch

from trainscale.config.options import RunOptions
from trainscale.runner.resolve import resolve
from trainscale.train import compile as compile_module
from trainscale.train.compile import CUDA_GRAPH_PASSES, compile_model, mark_cuda_graph_step

from tests.helpers.tiny import NormDropNet, tiny_data, tiny_workload


@pytest.fixture
def recorded(monkeypatch):
    """torch.compile, the warm-up pass and CUDA graph step marks, recorded, not run: the
    passes a mode takes are checked without a GPU (torch.device('cuda') needs none)."""
    calls: dict[str, list] = {"compile": [], "passes": [], "marks": []}

    def fake_compile(model, **kwargs):
        calls["compile"].append(kwargs)
        return model

    def fake_pass(model, x, y, workload, precision, device):
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
    _, seconds = compile_model(
        NormDropNet(),
        data.train_x[:8],
        data.train_y[:8],
        tiny_workload(),
        "fp32",
        torch.device(device),
        mode,
    )
    return seconds


def test_the_default_mode_is_torch_compiles_own_and_takes_one_pass(recorded):
    assert _compile("cuda", "default") == pytest.approx(0.25)
    assert recorded["compile"] == [{"mode": None}]
    assert recorded["passes"] == ["cuda"] and recorded["marks"] == []


def test_a_cuda_graph_mode_records_its_graphs_off_the_clock(recorded):
    # PyTorch records a graph on a call after the first: one pass would leave the
    # recording to the first timed steps.
    assert _compile("cuda", "reduce-overhead") == pytest.approx(0.25 * CUDA_GRAPH_PASSES)
    assert recorded["compile"] == [{"mode": "reduce-overhead"}]
    assert len(recorded["passes"]) == CUDA_GRAPH_PASSES >= 2
    assert len(recorded["marks"]) == CUDA_GRAPH_PASSES


def test_on_a_cpu_a_cuda_graph_mode_compiles_once_without_marks(recorded):
    assert _compile("cpu", "reduce-overhead") == pytest.approx(0.25)
    assert recorded["compile"] == [{"mode": "reduce-overhead"}]
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
