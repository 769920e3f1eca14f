"""A workload's pre-training phase is declared beside each of its twins (`KerasTwin.pretrain`,
`FlaxTwin.pretrain`), as `Workload.pretrain` is PyTorch's: no framework keeps a list of the
workloads it pre-trains, and a twin without the phase its PyTorch model has is one line."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from trainscale.errors import ConfigError
from trainscale.workloads import JAX, TENSORFLOW, builtin_workload_names, get_workload

DBN_META = {"num_classes": 10, "num_inputs": 784, "layers": [24, 16]}
PRETRAINING = [n for n in builtin_workload_names() if get_workload(n).pretrain is not None]


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_a_built_in_workload_pre_trains() -> None:
    assert PRETRAINING == ["mnist-dbn"]  # the check below checks something


@pytest.mark.parametrize(
    "framework",
    [
        pytest.param(
            TENSORFLOW, marks=pytest.mark.skipif(not _installed("tensorflow"), reason="no TF")
        ),
        pytest.param(JAX, marks=pytest.mark.skipif(not _installed("flax"), reason="no flax")),
    ],
)
def test_every_twin_of_a_pre_training_workload_pre_trains(framework: str) -> None:
    for name in PRETRAINING:
        twin = get_workload(name).build_model(DBN_META, framework)
        assert callable(twin.pretrain), f"{name}'s {framework} twin has no pre-training"


def _no_pretraining_twin() -> SimpleNamespace:
    return SimpleNamespace(model=None, pretrain=None)


@pytest.mark.skipif(not _installed("tensorflow"), reason="TensorFlow is not installed")
def test_a_keras_twin_without_the_phase_is_one_line() -> None:
    from trainscale.frameworks.tensorflow.pretrain import run_pretraining

    workload = get_workload("mnist-dbn")
    with pytest.raises(ConfigError, match="mnist-dbn.*Keras twin has no pre-training"):
        run_pretraining(_no_pretraining_twin(), workload, None, None, None, None, None)  # type: ignore[arg-type]


@pytest.mark.skipif(not _installed("flax"), reason="JAX is not installed")
def test_a_flax_twin_without_the_phase_is_one_line() -> None:
    from trainscale.frameworks.jax.pretrain import run_pretraining

    workload = get_workload("mnist-dbn")
    with pytest.raises(ConfigError, match="mnist-dbn.*flax twin has no pre-training"):
        run_pretraining(None, workload, _no_pretraining_twin(), None, {}, None, None, 1, None)  # type: ignore[arg-type]
