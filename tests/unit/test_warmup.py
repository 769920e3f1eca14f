"""The passes a run takes before its first step, off the clock (train/warmup.py): they leave
the model, its gradients and the random number generators as they were."""

from __future__ import annotations

import functools

import torch

from trainscale.train.compile import compile_model
from trainscale.train.warmup import timed_pass, warm_up_device

from tests.helpers.tiny import NormDropNet, tiny_data, tiny_workload


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in model.state_dict().items()}


def _assert_untouched(model, before, rng) -> None:
    assert torch.equal(torch.get_rng_state(), rng)
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name
    assert all(p.grad is None for p in model.parameters())


def test_the_warm_up_pass_is_timed_and_leaves_no_trace():
    torch.manual_seed(0)
    model = NormDropNet().train()
    before, rng = _state(model), torch.get_rng_state()
    data = tiny_data()
    seconds = timed_pass(
        model, data.train_x[:8], data.train_y[:8], tiny_workload(), "fp32", torch.device("cpu")
    )
    assert seconds > 0
    _assert_untouched(model, before, rng)


def test_a_cpu_run_takes_no_warm_up_pass():
    model, data = NormDropNet(), tiny_data()
    x, y = data.train_x[:8], data.train_y[:8]
    assert warm_up_device(model, x, y, tiny_workload(), "fp32", torch.device("cpu")) is None


def test_the_compilation_pass_leaves_the_model_as_it_was(monkeypatch):
    # Compiled for real by Dynamo, with the eager backend (no C++ build in a unit test): the
    # pass runs through the OptimizedModule, which must share the model's state with it.
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    torch.manual_seed(0)
    model = NormDropNet().train()
    before, rng = _state(model), torch.get_rng_state()
    data = tiny_data()
    compiled, seconds = compile_model(
        model, data.train_x[:8], data.train_y[:8], tiny_workload(), "fp32", torch.device("cpu")
    )
    assert seconds > 0 and isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)
    _assert_untouched(model, before, rng)
