"""A tiny workload, its data and resolved configs: they train in milliseconds on a CPU."""

from __future__ import annotations

from pathlib import Path

import torch

from trainscale.config.options import RunConfig, RunOptions
from trainscale.data.tensors import TensorData
from trainscale.runner.resolve import resolve
from trainscale.workloads.base import PYTORCH, Recipe, Workload


class TinyNet(torch.nn.Module):
    """A deterministic (dropout-free) conv net, so DDP and serial runs can be compared."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.fc = torch.nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def tiny_data(seed: int = 0, num_train: int = 96, num_test: int = 30) -> TensorData:
    """Random 8x8 one-channel images in 3 classes."""
    g = torch.Generator().manual_seed(seed)
    return TensorData(
        train_x=torch.randn(num_train, 1, 8, 8, generator=g),
        train_y=torch.randint(0, 3, (num_train,), generator=g),
        test_x=torch.randn(num_test, 1, 8, 8, generator=g),
        test_y=torch.randint(0, 3, (num_test,), generator=g),
        kind="real",  # treated as real so the evaluation path runs; never a real claim
        source="tests: random tensors",
    )


def tiny_workload() -> Workload:
    """`TinyNet` on `tiny_data`, under a registered name."""
    return Workload(
        name="mnist-cnn",  # borrow a registered name: config resolution looks it up
        description="tiny test net",
        models={PYTORCH: lambda meta: TinyNet()},
        locate_real=lambda request: Path("."),
        load_real=lambda request: tiny_data(),
        make_synthetic=lambda request: tiny_data(request.seed),
        target_accuracy=0.5,
        recipe=Recipe(optimizer="sgd", lr=0.05, batch_size=8, epochs=1.0, schedule="constant"),
    )


def tiny_config(**changes: object) -> RunConfig:
    """A resolved config for the tiny workload; changes are RunOptions fields."""
    options: dict[str, object] = dict(
        workload="mnist-cnn",
        threads_per_worker=1,
        affinity="none",
        global_batch_size=16,
        warmup_steps_untimed=1,
        allow_oversubscribe=True,
        # Tests compare numbers across settings: fp32 on every machine, where auto would
        # train in bf16 on CPUs that compute it natively.
        precision="fp32",
    )
    options.update(changes)
    return resolve(RunOptions.from_flat(options)).with_(channels_last=False)


class NormDropNet(torch.nn.Module):
    """Batch norm (running statistics) and dropout (random draws): what the passes before
    the first step (FLOP count, GPU warm-up, compilation) must not disturb."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4)
        self.drop = torch.nn.Dropout(0.5)
        self.fc = torch.nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.drop(torch.relu(self.norm(self.conv(x)))).flatten(1))
