"""Device resolution on a machine without a GPU (CI): clear refusals, cpu fallbacks."""

from __future__ import annotations

import pytest
import torch

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.runner.resolve import resolve, resolve_device

needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU case")


@needs_no_gpu
def test_cuda_without_a_gpu_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="no CUDA GPU is visible") as error:
        resolve_device("cuda", 1)
    assert "\n" not in str(error.value)


@needs_no_gpu
def test_auto_falls_back_to_cpu():
    assert resolve_device("auto", 1) == "cpu"


def test_cpu_is_cpu_without_asking_torch():
    assert resolve_device("cpu", 64) == "cpu"


def test_fp16_needs_cuda():
    with pytest.raises(ConfigError, match="fp16 needs --device cuda"):
        resolve(RunOptions.of(workload="mnist-cnn", precision="fp16", threads_per_worker=1))


def test_grad_accum_must_divide_the_batch():
    with pytest.raises(ConfigError, match="--grad-accum 3"):
        resolve(
            RunOptions.of(workload="mnist-cnn", batch_size=64, grad_accum=3, threads_per_worker=1)
        )
    config = resolve(
        RunOptions.of(workload="mnist-cnn", batch_size=64, grad_accum=4, threads_per_worker=1)
    )
    assert config.parallel.grad_accum == 4 and config.optimisation.global_batch_size == 64


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("device", "tpu", "--device must be one of cpu, cuda, auto"),
        ("grad_accum", 0, "--grad-accum"),
        ("bucket_cap_mb", -1.0, "--bucket-cap-mb"),
        ("breakdown_every", -1, "--breakdown-every"),
    ],
)
def test_bad_device_options(field, value, fragment):
    with pytest.raises(ConfigError, match=fragment):
        resolve(RunOptions.of(workload="mnist-cnn", threads_per_worker=1, **{field: value}))
