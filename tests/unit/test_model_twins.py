"""Every built-in workload names its model in each framework (`Workload.models`), the twins
are imported only by the runs that train them, and a builder that returns something other
than its framework's twin is one line naming the workload."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from trainscale.errors import WorkloadError
from trainscale.frameworks import FRAMEWORKS
from trainscale.frameworks.twin import check_twin
from trainscale.models.tensorflow import KerasTwin
from trainscale.workloads import builtin_workload_names, get_workload
from trainscale.workloads.base import FRAMEWORK_NAMES, TENSORFLOW

from tests.helpers.tiny import tiny_workload


def test_the_framework_names_a_workload_may_use_are_the_frameworks():
    assert sorted(FRAMEWORK_NAMES) == sorted(FRAMEWORKS)


@pytest.mark.parametrize("name", builtin_workload_names())
def test_every_built_in_workload_names_a_model_for_every_framework(name):
    assert get_workload(name).frameworks == sorted(FRAMEWORKS)


def test_building_the_pytorch_models_imports_neither_tensorflow_nor_jax():
    # A fresh interpreter: another test may already have imported them here.
    script = (
        "import sys\n"
        "from trainscale.workloads import builtin_workload_names, get_workload\n"
        "for name in builtin_workload_names():\n"
        "    meta = {'vocab_size': 50, 'num_classes': 2}\n"
        "    get_workload(name).build_model(meta)\n"
        "print(sorted(m for m in ('tensorflow', 'keras', 'jax', 'flax') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_a_builder_that_returns_no_twin_is_one_line_naming_the_workload():
    workload = tiny_workload()
    with pytest.raises(WorkloadError) as caught:
        check_twin(workload, TENSORFLOW, torch.nn.Linear(2, 2), KerasTwin)
    assert str(caught.value) == (
        f"workload {workload.name!r}: its tensorflow model builder returned Linear, not a "
        "trainscale.models.tensorflow.KerasTwin (docs/custom-workloads.md)"
    )
    check_twin(
        workload, TENSORFLOW, KerasTwin(object(), lambda torch_model, model: None), KerasTwin
    )
