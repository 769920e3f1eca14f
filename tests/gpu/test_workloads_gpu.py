"""Every built-in workload trains on one GPU in fp32, bf16 and fp16, with its figures right.

Each run's FLOPs per sample must match the count of the same model on the CPU (the count does
not depend on the device: a cuDNN RNN the counter cannot see, or a FLOP batch built on the
wrong device, shows up here as a mismatch or a missing count), and MFU must be a fraction.
Skipped without CUDA.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from trainscale.cli import main
from trainscale.data.tensors import DataRequest
from trainscale.train.flops import flops_batch, seeded_torch_model
from trainscale.train.precision import autocast
from trainscale.workloads import builtin_workload_names, get_workload

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

WORKLOADS = builtin_workload_names()
PRECISIONS = ["fp32", "bf16", "fp16"]


def cpu_flops_per_sample(workload_name: str) -> int | None:
    """The same model's training FLOPs per sample, counted on the CPU."""
    workload = get_workload(workload_name)
    data = workload.make_synthetic(DataRequest(seed=0))
    counted = seeded_torch_model(workload, data, seed=0)[1]
    return None if counted is None else counted.per_sample


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_workload_trains_on_the_gpu(tmp_path, capsys, workload, precision):
    args = [
        "run",
        workload,
        "--device",
        "cuda",
        "--precision",
        precision,
        "--data",
        "synthetic",
        "--steps",
        "20",
        "--no-eval",
        "--quiet",
        "--json",
        "--store",
        str(tmp_path / "s.db"),
    ]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["status"] == "completed"
    assert result["config"]["device"] == "cuda"
    assert result["precision"] == precision
    assert result["num_steps"] == 20
    assert 0 < result["step_time_s_median"] < 10
    assert result["peak_gpu_memory_bytes_per_worker"][0] > 0
    expected = cpu_flops_per_sample(workload)
    assert expected, "the CPU count is the reference"
    assert result["flops_per_sample"] == pytest.approx(expected, rel=0.01)
    assert result["mfu"] is not None and 0 < result["mfu"] < 1
    if precision == "fp32":
        # torch's defaults: cuDNN's convolutions and recurrent layers in TF32, cuBLAS's
        # matrix products in full fp32; the DBN does nothing but matrix products.
        mixed = "fp32" if workload == "mnist-dbn" else "fp32+tf32"
        assert result["mfu_peak"]["precision"] == mixed
    if get_workload(workload).recurrent and precision == "bf16":
        # Stored as bf16, and the reason says the recurrent layers computed in fp32.
        assert "recurrent layers compute in fp32" in result["config"]["precision_reason"]


class DtypeRecorder(TorchDispatchMode):
    """Records the dtype of every floating-point tensor each op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.dtypes: set[torch.dtype] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in torch.utils._pytree.tree_leaves(out):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                self.dtypes.add(value.dtype)
        return out


@pytest.mark.parametrize("workload", WORKLOADS)
def test_bf16_computes_no_fp16(workload):
    """A run stored as bf16 computes nothing in fp16 (which would need loss scaling): on CUDA,
    autocast's wrapper would run cuDNN RNNs in fp16 whatever its dtype."""
    spec = get_workload(workload)
    data = spec.make_synthetic(DataRequest(seed=0, max_train=64, max_test=8))
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = spec.build_model(data.meta).to(device)
    x, y = flops_batch(spec, data)
    recorder = DtypeRecorder()
    with recorder, autocast(device, "bf16"):
        loss = spec.loss(model(x.to(device)), y.to(device))
    loss.backward()
    assert torch.bfloat16 in recorder.dtypes or workload == "mnist-dbn"
    assert torch.float16 not in recorder.dtypes
