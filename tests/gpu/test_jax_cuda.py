"""JAX on a GPU through the CLI: one worker, its GPU, stored complete. Skipped without CUDA
or without jax."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from trainscale.cli import main

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("jax", "flax", "optax")),
        reason="needs jax, flax and optax",
    ),
]


def test_jax_trains_on_the_gpu_and_is_stored_complete(tmp_path, capsys):
    store = tmp_path / "s.db"
    args = ["mnist-cnn", "--framework", "jax", "--device", "cuda", "--data", "synthetic"]
    code = main(["run", *args, "--steps", "20", "--quiet", "--json", "--store", str(store)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)
    assert result["status"] == "completed"
    assert result["config"]["device"] == "cuda"
    assert result["config"]["framework"] == "jax"
    assert 0 < result["step_time_s_median"] < 10
    # JAX's backend computed on the GPU (its platform is 'gpu' for CUDA), one device.
    worker = result["workers"][0]
    assert not worker["jax_device"].startswith("cpu"), worker["jax_device"]
    assert worker["jax_distribution"] == "serial, 1 device"
