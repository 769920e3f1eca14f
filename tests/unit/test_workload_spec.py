"""The workload contract: model builders keyed by framework, everything else shared."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from trainscale.data.tensors import DataRequest
from trainscale.errors import ConfigError
from trainscale.workloads import get_workload, workload_names
from trainscale.workloads.base import JAX, PYTORCH, TENSORFLOW

from tests.helpers.tiny import TinyNet, tiny_workload


@pytest.mark.parametrize("name", workload_names())
def test_every_workload_builds_its_pytorch_model_from_its_data(name):
    workload = get_workload(name)
    assert workload.frameworks == sorted([PYTORCH, TENSORFLOW, JAX])
    data = workload.make_synthetic(DataRequest(max_train=2, max_test=2))
    model = workload.build_model(data.meta)  # PyTorch unless another framework is named
    assert isinstance(model, torch.nn.Module)
    assert isinstance(workload.build_model(data.meta, framework=PYTORCH), torch.nn.Module)


def test_a_framework_without_a_builder_is_one_line_naming_those_there_are():
    with pytest.raises(ConfigError) as error:
        tiny_workload().build_model({}, framework="jax")
    assert str(error.value) == "workload 'mnist-cnn' has no jax model; it has: pytorch"


def test_a_twin_whose_framework_is_missing_is_one_line_naming_the_extra():
    def twin_of_a_missing_framework(meta):
        import flax_that_is_not_installed  # noqa: F401

    spec = replace(
        tiny_workload(), models={PYTORCH: lambda meta: TinyNet(), JAX: twin_of_a_missing_framework}
    )
    with pytest.raises(ConfigError) as error:
        spec.build_model({}, framework=JAX)
    assert str(error.value) == (
        "the jax model of workload 'mnist-cnn' needs flax_that_is_not_installed, which is not "
        "installed: pip install 'trainscale[jax]'"
    )


def test_builders_are_chosen_by_framework():
    built = []
    spec = replace(
        tiny_workload(),
        models={
            PYTORCH: lambda meta: TinyNet(),
            "tensorflow": lambda meta: built.append(dict(meta)) or "a keras model",
        },
    )
    assert spec.build_model({"num_classes": 3}, framework="tensorflow") == "a keras model"
    assert built == [{"num_classes": 3}]
    assert isinstance(spec.build_model({}), TinyNet)
    with pytest.raises(ConfigError, match="no jax model; it has: pytorch, tensorflow$"):
        spec.build_model({}, framework="jax")


def test_a_workload_needs_a_model_builder():
    with pytest.raises(ValueError, match="has no model builder"):
        replace(tiny_workload(), models={})
