"""cuDNN autotuning is switched on for fixed-shape convolution workloads on CUDA only."""

from __future__ import annotations

import pytest
import torch

from trainscale.train.setup import configure_cudnn, wants_cudnn_benchmark
from trainscale.workloads import get_workload

CUDA = torch.device("cuda", 0)
CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("name", "wanted"),
    [
        ("mnist-cnn", True),
        ("cifar10-resnet44", True),
        ("mnist-dbn", False),
        ("imdb-bilstm", False),
        ("imdb-bigru", False),
    ],
)
def test_decision_on_cuda(name: str, wanted: bool) -> None:
    assert wants_cudnn_benchmark(get_workload(name), CUDA) is wanted


@pytest.mark.parametrize("name", ["mnist-cnn", "cifar10-resnet44", "imdb-bilstm"])
def test_never_on_cpu(name: str) -> None:
    assert wants_cudnn_benchmark(get_workload(name), CPU) is False


def test_configure_leaves_the_flag_alone_off_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    configure_cudnn(get_workload("mnist-cnn"), CPU)
    assert torch.backends.cudnn.benchmark is False


def test_configure_sets_both_ways_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    configure_cudnn(get_workload("mnist-cnn"), CUDA)
    assert torch.backends.cudnn.benchmark is True
    configure_cudnn(get_workload("imdb-bilstm"), CUDA)
    assert torch.backends.cudnn.benchmark is False
