"""The passes a run takes before its first step, off the clock (train/warmup.py): they leave
the model, its gradients and the random number generators as they were, and the warm-up
step launches every operator a real step does (on a GPU, each one's first launch is the
one-off cost it is there to pay). That the warm-up step leaves training as it would have
been, bit for bit, is tests/unit/test_trainer.py's."""

from __future__ import annotations

import functools

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import trainscale.train.trainer as trainer
from trainscale.config.options import RunOptions
from trainscale.data.tensors import DataRequest
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.runner.resolve import resolve
from trainscale.train.compile import compile_model
from trainscale.train.divergence import StepLosses
from trainscale.train.loss import run_loss
from trainscale.train.step import TrainStep
from trainscale.train.trainer import train
from trainscale.train.warmup import timed_pass
from trainscale.workloads import get_workload

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
        model,
        data.train_x[:8],
        data.train_y[:8],
        run_loss(tiny_workload()),
        "fp32",
        torch.device("cpu"),
    )
    assert seconds > 0
    _assert_untouched(model, before, rng)


class _OperatorNames(TorchDispatchMode):
    """The names of the aten operators run while it is active (`add_`, `index`, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    ("workload", "precision"),
    [
        ("mnist-cnn", "fp32"),  # adam, one-cycle, label smoothing
        ("cifar10-resnet44", "bf16"),  # augmentation, momentum SGD, batch norm, autocast
        ("imdb-bigru", "fp32"),  # embeddings, a recurrent layer, length bucketing
    ],
)
def test_the_warm_up_step_runs_every_operator_a_training_step_runs(
    monkeypatch, workload, precision
):
    # Forced on the CPU, the warm-up's operators are recorded; then those of the run's first
    # step, from its batch draw to the loop keeping its loss. On a GPU any operator the
    # warm-up misses pays its kernel's first launch on the clock (164 ms for the first step
    # of mnist-cnn on an H200, when the warm-up was a forward and backward alone).
    options = RunOptions.from_flat(
        dict(
            workload=workload,
            data="synthetic",
            steps=2,
            global_batch_size=8,
            threads_per_worker=1,
            affinity="none",
            allow_oversubscribe=True,
            precision=precision,
            warmup_steps_untimed=0,
            evaluate=False,
        )
    )
    config = resolve(options).with_(label_smoothing=0.1)
    spec = get_workload(workload)
    data = spec.make_synthetic(DataRequest(seed=0, max_train=64, max_test=8))
    warm, step = _OperatorNames(), _OperatorNames()

    warm_up = TrainStep.warm_up

    def recorded_warm_up(self, batches):
        with warm:
            return warm_up(self, batches)

    first_step = TrainStep.step
    add = StepLosses.add

    recording = []

    def step_recorded_once(self, given):
        if given.index == 0:
            recording.append(step.__enter__())  # left once the loop has kept its loss
        return first_step(self, given)

    def add_then_stop(self, loss):
        add(self, loss)
        if len(recording) == 1:  # the warm-up step's own comes before any recording
            recording.append(step.__exit__(None, None, None))

    monkeypatch.setattr(trainer, "warms_up", lambda device: True)  # forced on the CPU
    monkeypatch.setattr(TrainStep, "warm_up", recorded_warm_up)
    monkeypatch.setattr(TrainStep, "step", step_recorded_once)
    monkeypatch.setattr(StepLosses, "add", add_then_stop)
    train(config, spec, data, make_strategy(config, DistEnv()))
    assert step.names and warm.names
    assert step.names <= warm.names, f"not warmed up: {sorted(step.names - warm.names)}"


def test_the_compilation_pass_leaves_the_model_as_it_was(monkeypatch):
    # Compiled for real by Dynamo, with the eager backend (no C++ build in a unit test): the
    # pass runs through the OptimizedModule, which must share the model's state with it.
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    torch.manual_seed(0)
    model = NormDropNet().train()
    before, rng = _state(model), torch.get_rng_state()
    data = tiny_data()
    compiled, _, seconds = compile_model(
        model,
        run_loss(tiny_workload()),
        data.train_x[:8],
        data.train_y[:8],
        "fp32",
        torch.device("cpu"),
    )
    assert seconds > 0 and isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)
    _assert_untouched(model, before, rng)
