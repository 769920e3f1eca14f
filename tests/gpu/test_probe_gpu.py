"""The probe and the hardware figures on GPUs: matmul per precision, host-device copies,
NCCL all-reduce, and MFU and energy in a GPU run's summary. Skipped without CUDA."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from trainscale.cli import main
from trainscale.hardware.peaks import match_gpu
from trainscale.results.store import RunStore

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def probe_json(argv: list[str], store, capsys) -> dict:
    assert main(["probe", "--device", "cuda", *argv, "--json", "--store", str(store)]) == 0
    return json.loads(capsys.readouterr().out)


def test_cuda_matmul_and_copies_are_measured_and_stored(tmp_path, capsys) -> None:
    store = tmp_path / "s.db"
    result = probe_json(
        ["--only", "matmul,transfer", "--quick", "--matmul-sizes", "512,1024", "--repeats", "2"],
        store,
        capsys,
    )
    assert result["device"] == torch.cuda.get_device_name(0)
    precisions = result["matmul"]["precisions"]
    assert {"fp32", "tf32", "fp16"} <= set(precisions)
    for figures in precisions.values():
        assert figures["best_flops_per_s"] > 0
    for direction in ("h2d", "d2h"):
        assert result["transfer"][direction]["best_bytes_per_s"] > 0
    if match_gpu(result["device"]) is not None:
        # A known GPU: the probe says which share of the datasheet peak it reached.
        assert precisions["fp16"]["fraction_of_theoretical_peak"] > 0
    with RunStore(store) as opened:
        assert opened.latest_probe("transfer", device_type="cuda") is not None


def test_env_and_runs_probes_show_a_full_cuda_probe(tmp_path, capsys) -> None:
    store = tmp_path / "s.db"
    argv = ["--only", "matmul", "--matmul-sizes", "1024", "--precisions", "fp32,bf16"]
    result = probe_json([*argv, "--repeats", "2"], store, capsys)
    name = result["device"]
    assert main(["env", "--json", "--store", str(store)]) == 0
    measured = json.loads(capsys.readouterr().out)["measured_matmul"]["probes"]
    assert measured[f"cuda: {name}"]["probe_id"] == result["probe_ids"]["matmul"]
    assert set(measured[f"cuda: {name}"]["flops_per_s"]) == {"fp32", "bf16"}
    assert main(["runs", "probes", "--store", str(store)]) == 0
    (row,) = capsys.readouterr().out.splitlines()[1:]
    assert f"cuda: {name}" in row and "fp32 " in row and "TFLOP/s" in row


def test_a_cuda_probe_lets_simulate_predict_a_workload_it_never_ran(tmp_path, capsys) -> None:
    probed = tmp_path / "probed.db"
    argv = ["--only", "matmul,dispatch", "--matmul-sizes", "1024", "--precisions", "bf16"]
    result = probe_json([*argv, "--repeats", "2"], probed, capsys)
    per_op = result["dispatch"]["seconds_per_op"]
    assert 0 < per_op < 1e-3 and result["dispatch"]["step_ops"] > 0
    # Tests run side by side may make the probe busy, and simulate passes busy probes over:
    # the figures are stored again as a quiet probe's, to check what simulate makes of them.
    store = tmp_path / "s.db"
    with RunStore(probed) as opened, RunStore(store) as target:
        for kind in ("matmul", "dispatch"):
            probe = opened.latest_probe(kind)
            figures = {**probe.result, "contention": {"verdict": "quiet"}}
            target.add_probe(
                kind, figures, probe.env, host=probe.host, device_type="cuda", device=probe.device
            )
    argv = ["simulate", "mnist-cnn", "--cluster", "local", "--device", "cuda", "--workers", "1"]
    assert main([*argv, "--precision", "bf16", "--json", "--store", str(store)]) == 0
    predicted = json.loads(capsys.readouterr().out)
    calibration = predicted["calibration"]
    assert calibration["source"] == "peak" and calibration["device_kind"] == "cuda"
    assert calibration["compute_fixed_s"] > 0


def test_cudnn_runs_a_recurrent_layer_as_far_fewer_operators_than_the_cpu() -> None:
    from trainscale.simulator.buckets import workload_layout

    on_cuda = workload_layout("imdb-bilstm", device="cuda").ops_per_step
    on_cpu = workload_layout("imdb-bilstm", device="cpu").ops_per_step
    assert on_cuda and on_cpu and on_cuda * 10 < on_cpu


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_nccl_allreduce_fit(tmp_path, capsys) -> None:
    result = probe_json(
        ["--only", "allreduce", "--workers", "2", "--quick", "--repeats", "2"],
        tmp_path / "s.db",
        capsys,
    )
    fit = result["allreduce"]
    assert fit["backend"] == "nccl" and fit["workers"] == 2
    assert fit["alpha_s"] >= 0 and fit["beta_s_per_byte"] > 0


def test_more_gpu_workers_than_gpus_is_one_line(tmp_path, capsys) -> None:
    too_many = torch.cuda.device_count() + 1
    status = main(
        ["probe", "--device", "cuda", "--workers", str(too_many), "--store", str(tmp_path / "s.db")]
    )
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert "GPU(s) visible" in err and "\n" not in err


def test_gpu_run_records_mfu_and_energy(tmp_path, capsys) -> None:
    store = tmp_path / "s.db"
    argv = ["run", "mnist-cnn", "--device", "cuda", "--precision", "bf16", "--data", "synthetic"]
    argv += ["--steps", "30", "--no-eval", "--quiet", "--json", "--store", str(store)]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["hardware"]["device_type"] == "cuda" and result["hardware"]["devices"] == 1
    assert result["achieved_tflops"] > 0
    if match_gpu(torch.cuda.get_device_name(0)) is not None:
        assert 0 < result["mfu"] < 1 and result["mfu_peak"]["precision"] == "bf16"
    else:
        assert result["mfu"] is None  # unknown GPU: absent, never made up
    energy = result["energy_j"]
    if importlib.util.find_spec("pynvml") is not None:
        # NVML is there (the gpu extra): the GPU's energy counter must have been read.
        assert energy["gpu_j"] > 0, energy
    else:
        assert energy["gpu_j"] is None and energy["unmeasured"]["gpu"]
