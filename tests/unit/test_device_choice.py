"""Device resolution on a machine without a GPU (CI): clear refusals, cpu fallbacks."""

from __future__ import annotations

import pytest
import torch

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.frameworks import missing_modules
from trainscale.runner.resolve import resolve, resolve_device

from tests.helpers.jax_plugin import pretend_jax_cuda_plugin

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


def _one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


JAX_RUN = {"workload": "mnist-cnn", "framework": "jax", "threads_per_worker": 1}


@pytest.mark.skipif(any(missing_modules("jax")), reason="jax is not installed")
def test_jax_without_its_cuda_plugin_is_refused_on_a_gpu_before_launch(monkeypatch):
    _one_gpu(monkeypatch)
    pretend_jax_cuda_plugin(monkeypatch, installed=False)
    with pytest.raises(ConfigError, match=r"no CUDA backend .*jax\[cuda13\]") as error:
        resolve(RunOptions.of(**JAX_RUN, device="cuda"))
    assert "\n" not in str(error.value)
    # auto: the best device JAX can train on here, the CPU, whatever torch sees.
    assert resolve(RunOptions.of(**JAX_RUN, device="auto")).parallel.device == "cpu"


def test_an_older_jaxlib_built_with_cuda_needs_no_plugin(monkeypatch):
    import importlib.metadata

    from trainscale.frameworks import FRAMEWORKS

    pretend_jax_cuda_plugin(monkeypatch, installed=False)
    assert FRAMEWORKS["jax"].gpu_reason() is not None  # jaxlib here is a CPU build
    real = importlib.metadata.version
    built_with_cuda = "0.4.28+cuda12.cudnn89"
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: built_with_cuda if name == "jaxlib" else real(name),
    )
    assert FRAMEWORKS["jax"].gpu_reason() is None


@pytest.mark.skipif(any(missing_modules("jax")), reason="jax is not installed")
def test_jax_with_its_cuda_plugin_trains_on_the_gpu_but_not_in_fp16(monkeypatch):
    _one_gpu(monkeypatch)
    pretend_jax_cuda_plugin(monkeypatch, installed=True)
    assert resolve(RunOptions.of(**JAX_RUN, device="auto")).parallel.device == "cuda"
    with pytest.raises(ConfigError, match="fp16 is not available with --framework jax"):
        resolve(RunOptions.of(**JAX_RUN, device="cuda", precision="fp16"))


@pytest.mark.skipif(any(missing_modules("tensorflow")), reason="tensorflow is not installed")
def test_auto_trains_tensorflow_on_the_cpu_of_a_gpu_machine(monkeypatch):
    _one_gpu(monkeypatch)
    opts = RunOptions.of(workload="mnist-cnn", framework="tensorflow", threads_per_worker=1)
    assert resolve(opts.with_(device="auto")).parallel.device == "cpu"
    with pytest.raises(ConfigError, match="CPU only"):
        resolve(opts.with_(device="cuda"))
