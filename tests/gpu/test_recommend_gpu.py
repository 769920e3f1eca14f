"""`trainscale recommend` on a GPU machine: the GPU settings are searched in the same trials
as the CPU ones, and a GPU trial trains on the GPU. Skipped without CUDA."""

from __future__ import annotations

import json

import pytest
import torch

from trainscale.cli import main
from trainscale.results.store import RunStore

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_recommend_searches_the_gpu_settings_beside_the_cpu_ones(tmp_path, capsys, one_host_core):
    # One core, one batch: 2 CPU settings (fp32, bf16 where native) beside the GPU ones.
    store = tmp_path / "s.db"
    args = ["recommend", "mnist-cnn", "--quick", "--data", "synthetic", "--batch-multipliers", "1"]
    code = main([*args, "--budget-s", "300", "--store", str(store), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)
    gpu = [c["label"] for c in result["space"]["candidates"] if c["gpus"]]
    assert gpu and gpu[0] == "1 GPU fp32 b64"
    trialled = {t["label"] for t in result["trials"] if t["error"] is None}
    assert set(gpu) <= trialled  # every GPU setting ran its first trial
    with RunStore(store) as opened:
        cuda = [run for run in opened.list_runs() if run.config["device"] == "cuda"]
    assert cuda and all(run.status == "completed" for run in cuda)
    # Whichever wins, the command reproduces it, on the GPU where a GPU setting won.
    assert ("--device cuda" in result["command"]) == bool(result["best"]["gpus"])
