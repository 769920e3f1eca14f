"""The peak an fp32 GPU run is held against follows what computed in TF32 (no GPU needed):
FLOPs counted by kind of operator, torch's per-kind TF32 switches, and the peak of the mix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from trainscale.frameworks import FRAMEWORKS, JAX, PYTORCH, TENSORFLOW
from trainscale.hardware.figures import RunDevices, hardware_figures
from trainscale.hardware.peaks import match_gpu, rate_of_mix
from trainscale.hardware.tf32 import ALL_TF32, NO_TF32, Tf32Use, precision_mix, torch_tf32_use
from trainscale.metrics.flop_kinds import CONVOLUTION, MATMUL, RECURRENT
from trainscale.results.store import RunStore
from trainscale.train.flops import count_flops
from trainscale.workloads import get_workload

from tests.helpers.tiny import tiny_workload

H100 = "NVIDIA H100 80GB HBM3"
TORCH_DEFAULTS = Tf32Use(matmul=False, convolution=True, recurrent=True)
"""torch's defaults: cuDNN may use TF32, cuBLAS may not."""


def _peaks(gpu: str = H100) -> dict[str, float]:
    entry = match_gpu(gpu)
    assert entry is not None
    return {p: tflops * 1e12 for p, tflops in entry.tflops.items()}


@pytest.fixture
def torch_switches() -> Iterator[None]:
    """Restores torch's TF32 switches (process-wide state) after a test sets them."""
    b = torch.backends
    leaves = (b.cuda.matmul, b.cudnn.conv, b.cudnn.rnn)
    before = [leaf.fp32_precision for leaf in leaves]
    yield
    for leaf, value in zip(leaves, before, strict=True):
        leaf.fp32_precision = value


def _figures(flops_by_kind: dict[str, float] | None, precision: str = "fp32", **kwargs):
    summary = {"flops_per_sample": 1e9, "samples_per_s": 10_000.0}  # 10 TFLOP/s achieved
    if flops_by_kind is not None:
        summary["flops_per_sample_by_kind"] = flops_by_kind
    devices = RunDevices("cuda", 1, precision, **kwargs)
    return hardware_figures(devices, summary, [{}]).summary()


@pytest.fixture
def on_h100(monkeypatch: pytest.MonkeyPatch) -> None:
    import trainscale.hardware.figures as figures

    monkeypatch.setattr(figures, "cuda_device", lambda: H100)


def test_a_count_is_split_by_kind_of_operator() -> None:
    cnn = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4 * 26 * 26, 10))
    counted = count_flops(cnn, torch.randn(2, 1, 28, 28), torch.tensor([1, 2]), tiny_workload())
    assert counted is not None and set(counted.by_kind) == {CONVOLUTION, MATMUL}
    assert sum(counted.by_kind.values()) == counted.per_sample

    class Recurrent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.LSTM(8, 16, batch_first=True, bidirectional=True)
            self.out = nn.Linear(32, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(self.rnn(x)[0][:, -1])

    counted = count_flops(Recurrent(), torch.randn(2, 5, 8), torch.tensor([0, 2]), tiny_workload())
    assert counted is not None and set(counted.by_kind) == {RECURRENT, MATMUL}
    assert counted.by_kind[RECURRENT] > counted.by_kind[MATMUL]


def test_an_fp32_gpu_run_computes_in_the_precision_each_kind_is_allowed() -> None:
    cnn = {CONVOLUTION: 900, MATMUL: 100}
    assert precision_mix("fp32", "cuda", TORCH_DEFAULTS, cnn) == {"tf32": 0.9, "fp32": 0.1}
    assert precision_mix("fp32", "cuda", TORCH_DEFAULTS, {MATMUL: 5}) == {"fp32": 1.0}
    assert precision_mix("fp32", "cuda", TORCH_DEFAULTS, {RECURRENT: 5}) == {"tf32": 1.0}
    assert precision_mix("fp32", "cuda", ALL_TF32, cnn) == {"tf32": 1.0}
    assert precision_mix("fp32", "cuda", NO_TF32, cnn) == {"fp32": 1.0}
    # Autocast computes the products in its own precision; a CPU in the run's.
    assert precision_mix("bf16", "cuda", TORCH_DEFAULTS, cnn) == {"bf16": 1.0}
    assert precision_mix("fp32", "cpu", ALL_TF32, cnn) == {"fp32": 1.0}
    # No split: known only where every kind agrees.
    assert precision_mix("fp32", "cuda", ALL_TF32, None) == {"tf32": 1.0}
    assert precision_mix("fp32", "cuda", NO_TF32, None) == {"fp32": 1.0}
    assert precision_mix("fp32", "cuda", TORCH_DEFAULTS, None) == {}


def test_the_rate_of_a_mix_adds_the_times_of_its_parts() -> None:
    rates = {"tf32": 400.0, "fp32": 50.0}
    # 0.5 / 400 + 0.5 / 50 seconds per FLOP.
    assert rate_of_mix({"tf32": 0.5, "fp32": 0.5}, rates.get) == pytest.approx(1 / 0.01125)
    assert rate_of_mix({"tf32": 1.0}, rates.get) == 400.0
    assert rate_of_mix({"bf16": 1.0}, rates.get) is None


def test_an_fp32_mlp_on_an_h100_is_held_against_the_fp32_peak(on_h100: None) -> None:
    # torch's defaults: matrix products stay in full fp32 (cuBLAS TF32 off).
    got = _figures({MATMUL: 10**9}, gpu_tf32=lambda: TORCH_DEFAULTS)
    assert got["mfu_peak"]["precision"] == "fp32"
    assert got["mfu_peak"]["tflops"] == pytest.approx(67.0)
    assert got["mfu"] == pytest.approx(10.0 / 67.0)


def test_an_fp32_cnn_on_an_h100_is_held_against_the_peak_of_its_mix(on_h100: None) -> None:
    got = _figures({CONVOLUTION: 9 * 10**8, MATMUL: 10**8}, gpu_tf32=lambda: TORCH_DEFAULTS)
    peaks = _peaks()
    mixed = 1 / (0.9 / peaks["tf32"] + 0.1 / peaks["fp32"])
    assert got["mfu_peak"]["precision"] == "fp32+tf32"
    assert got["mfu_peak"]["tflops"] == pytest.approx(mixed / 1e12)
    assert "10% in fp32 (67), 90% in tf32 (494.5)" in got["mfu_peak"]["source"]
    assert got["mfu"] == pytest.approx(10e12 / mixed)
    # All in TF32 when cuBLAS may use it too (torch.set_float32_matmul_precision("high")).
    tf32 = _figures({CONVOLUTION: 9 * 10**8, MATMUL: 10**8}, gpu_tf32=lambda: ALL_TF32)
    assert tf32["mfu_peak"]["precision"] == "tf32"
    assert tf32["mfu_peak"]["tflops"] == pytest.approx(494.5)


def test_a_bf16_gpu_run_is_held_against_the_bf16_peak(on_h100: None) -> None:
    got = _figures({MATMUL: 10**9}, precision="bf16", gpu_tf32=lambda: TORCH_DEFAULTS)
    assert got["mfu_peak"]["precision"] == "bf16"
    assert got["mfu_peak"]["tflops"] == pytest.approx(989.5)


def test_mfu_vs_probe_takes_the_probes_rates_of_the_same_mix(
    on_h100: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainscale.hardware.figures as figures

    monkeypatch.setattr(figures.socket, "gethostname", lambda: "gpu-host")
    summary = {
        "flops_per_sample": 10**9,
        "flops_per_sample_by_kind": {CONVOLUTION: 5 * 10**8, MATMUL: 5 * 10**8},
        "samples_per_s": 10_000.0,
    }
    where = {"host": "gpu-host", "device_type": "cuda", "device": H100}
    devices = RunDevices("cuda", 1, "fp32", lambda: TORCH_DEFAULTS)
    with RunStore(tmp_path / "s.db") as store:
        measured = {"fp32": 50e12, "tf32": 400e12}
        both = {p: {"best_flops_per_s": rate} for p, rate in measured.items()}
        store.add_probe("matmul", {"precisions": both}, {}, **where)
        # A newer probe without TF32 cannot rate the mix: the older one is the yardstick.
        fp32_only = {"fp32": {"best_flops_per_s": 51e12}}
        store.add_probe("matmul", {"precisions": fp32_only}, {}, **where)
        got = hardware_figures(devices, summary, [{}], store).summary()
    reachable = 1 / (0.5 / 400e12 + 0.5 / 50e12)
    assert got["mfu_probe_peak"]["precision"] == "fp32+tf32"
    assert got["mfu_probe_peak"]["tflops"] == pytest.approx(reachable / 1e12)
    assert got["mfu_vs_probe"] == pytest.approx(10e12 / reachable)


def test_torch_switches_are_read_per_kind_whichever_api_set_them(torch_switches: None) -> None:
    assert torch_tf32_use() == TORCH_DEFAULTS
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    assert torch_tf32_use() == ALL_TF32
    # The new API lets convolutions and recurrent layers differ, where reading the legacy
    # torch.backends.cudnn.allow_tf32 raises.
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    assert torch_tf32_use() == Tf32Use(matmul=True, convolution=False, recurrent=True)


def test_each_framework_says_what_it_computes_in_tf32() -> None:
    assert FRAMEWORKS[PYTORCH].gpu_tf32() == torch_tf32_use()
    assert FRAMEWORKS[TENSORFLOW].gpu_tf32() == ALL_TF32
    jax = pytest.importorskip("jax")
    assert FRAMEWORKS[JAX].gpu_tf32() == ALL_TF32  # XLA's default on GPUs
    jax.config.update("jax_default_matmul_precision", "highest")
    try:
        assert FRAMEWORKS[JAX].gpu_tf32() == NO_TF32
    finally:
        jax.config.update("jax_default_matmul_precision", None)


def test_a_bf16_text_rnn_on_a_gpu_holds_its_recurrent_flops_against_tf32(on_h100: None) -> None:
    split = {RECURRENT: 8 * 10**8, MATMUL: 2 * 10**8}
    got = _figures(split, precision="bf16", gpu_tf32=lambda: TORCH_DEFAULTS, recurrent_in_fp32=True)
    peaks = _peaks()
    assert got["mfu_peak"]["precision"] == "tf32+bf16"
    assert got["mfu_peak"]["tflops"] == pytest.approx(
        1 / (0.8 / peaks["tf32"] + 0.2 / peaks["bf16"]) / 1e12
    )
    # Only PyTorch's RNNs keep to fp32 under bf16, and only on a GPU.
    bilstm = get_workload("imdb-bilstm")
    assert bilstm.recurrent_in_fp32(PYTORCH, "cuda", "bf16")
    assert not bilstm.recurrent_in_fp32(JAX, "cuda", "bf16")
    assert not bilstm.recurrent_in_fp32(PYTORCH, "cpu", "bf16")
    assert not bilstm.recurrent_in_fp32(PYTORCH, "cuda", "fp16")
    assert not get_workload("mnist-cnn").recurrent_in_fp32(PYTORCH, "cuda", "bf16")
