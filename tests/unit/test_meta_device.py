"""Models built for their shapes alone (models/meta_device.py): the parameter counts of the
listing and of the memory check, without drawing initial values or importing torch's
compiler stack."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from trainscale.data.tensors import DataRequest
from trainscale.models.meta_device import shapes_only
from trainscale.workloads import builtin_workload_names, get_workload


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", builtin_workload_names())
def test_a_workload_built_for_its_shapes_has_the_parameters_of_a_real_build(name: str) -> None:
    workload = get_workload(name)
    meta = workload.make_synthetic(DataRequest(max_train=2, max_test=2)).meta
    with shapes_only():
        shaped = workload.build_model(meta)
    real = workload.build_model(meta)
    assert all(p.is_meta for p in shaped.parameters())
    assert [p.shape for p in shaped.parameters()] == [p.shape for p in real.parameters()]
    assert [b.shape for b in shaped.buffers()] == [b.shape for b in real.buffers()]
    assert parameter_count(shaped) == parameter_count(real) > 0


def test_building_every_model_for_its_shapes_imports_no_compiler() -> None:
    # In a fresh interpreter: this one may have imported torch._dynamo already. The draws
    # of nn.init (normal_ and its kin) run on the meta device through Python references that
    # import it, a second of `trainscale workloads` and of every run's start.
    script = (
        "import sys\n"
        "from trainscale.data.tensors import DataRequest\n"
        "from trainscale.models.meta_device import shapes_only\n"
        "from trainscale.workloads import get_workload, workload_names\n"
        "from trainscale.workloads.architectures import architecture_names\n"
        "for name in workload_names() + architecture_names():\n"
        "    workload = get_workload(name)\n"
        "    meta = workload.make_synthetic(DataRequest(max_train=1, max_test=1)).meta\n"
        "    with shapes_only():\n"
        "        workload.build_model(meta)\n"
        "print(sorted(m for m in sys.modules if m.startswith('torch._dynamo'))[:3])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


def test_only_meta_tensors_are_left_undrawn() -> None:
    torch.manual_seed(0)
    with shapes_only():
        on_cpu = torch.zeros(1000, device="cpu")
        nn.init.normal_(on_cpu)  # a real tensor keeps its draw
        on_meta = torch.empty(3, 4)
        nn.init.kaiming_normal_(on_meta)
        shaped = torch.randn(2, 5, generator=torch.Generator().manual_seed(1))
        # Ops that are no value fill still run: the shape changes.
        on_meta.t_()
    assert on_cpu.std() > 0.5
    assert on_meta.is_meta and on_meta.shape == (4, 3)
    assert shaped.is_meta and shaped.shape == (2, 5)
