"""GPU paths: one GPU, mixed precision, compile, and DDP over NCCL. Skipped without CUDA."""

from __future__ import annotations

import json

import pytest
import torch

from trainscale.cli import main

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SYNTH = ["--data", "synthetic", "--steps", "30", "--no-eval", "--quiet", "--json"]


def run_json(args, store, capsys) -> dict:
    assert main(["run", *args, "--store", str(store)]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_one_gpu_run_in_each_precision(tmp_path, capsys, precision):
    result = run_json(
        ["mnist-cnn", "--device", "cuda", "--precision", precision, *SYNTH],
        tmp_path / "s.db",
        capsys,
    )
    assert result["status"] == "completed" and result["precision"] == precision
    assert result["config"]["device"] == "cuda"
    assert result["peak_gpu_memory_bytes_per_worker"][0] > 0
    # CUDA-event timing: every step has a positive, finite time.
    assert 0 < result["step_time_s_median"] < 10


def test_compile_is_timed_apart(tmp_path, capsys):
    result = run_json(
        ["cifar10-resnet44", "--device", "cuda", "--compile", "--batch-size", "128", *SYNTH],
        tmp_path / "s.db",
        capsys,
    )
    assert result["compile_time_s"] > 0
    assert result["train_time_s"] < result["compile_time_s"] + 1e9  # both recorded
    # The eager warm-up step too: the loss, optimizer and batch draw stay eager.
    assert result["device_warmup_s"] > 0


def test_cuda_graphs_train_with_their_recording_off_the_clock(tmp_path, capsys):
    args = ["mnist-cnn", "--device", "cuda", "--global-batch-size", "512", *SYNTH]
    graphs = run_json(
        [*args, "--compile", "--compile-mode", "reduce-overhead"], tmp_path / "s.db", capsys
    )
    assert graphs["status"] == "completed"
    assert graphs["config"]["compile_mode"] == "reduce-overhead"
    assert graphs["compile_time_s"] > 0 and graphs["num_steps"] == 30
    # The same samples and FLOPs a step as eager: the graphs replay the same work.
    eager = run_json(args, tmp_path / "s.db", capsys)
    assert graphs["flops_per_sample"] == eager["flops_per_sample"]


def test_an_eager_gpu_run_warms_the_device_up_off_the_clock(tmp_path, capsys):
    result = run_json(["mnist-cnn", "--device", "cuda", *SYNTH], tmp_path / "s.db", capsys)
    assert result["device_warmup_s"] > 0


def test_auto_picks_the_gpu(tmp_path, capsys):
    result = run_json(["mnist-cnn", "--device", "auto", *SYNTH], tmp_path / "s.db", capsys)
    assert result["config"]["device"] == "cuda"


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_two_gpu_ddp_over_nccl(tmp_path, capsys):
    result = run_json(
        ["mnist-cnn", "--device", "cuda", "--workers", "2", "--grad-accum", "2", *SYNTH],
        tmp_path / "s.db",
        capsys,
    )
    assert result["world_size"] == 2
    assert result["breakdown_s"]["exposed_comm"] is not None


def test_more_gpu_workers_than_gpus_is_refused(tmp_path, capsys):
    n = torch.cuda.device_count() + 1
    code = main(
        [
            "run",
            "mnist-cnn",
            "--device",
            "cuda",
            "--workers",
            str(n),
            "--allow-oversubscribe",
            "--store",
            str(tmp_path / "s.db"),
        ]
    )
    assert code == 2
    assert "GPU" in capsys.readouterr().err
