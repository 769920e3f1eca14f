"""JAX on a GPU through the CLI: one worker, its GPU, stored complete. Skipped without CUDA
or without jax and its CUDA plugin."""

from __future__ import annotations

import json

import pytest
import torch

from trainscale.cli import main
from trainscale.frameworks import FRAMEWORKS, missing_modules

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(bool(missing_modules("jax")), reason="needs jax, flax and optax"),
    pytest.mark.skipif(
        FRAMEWORKS["jax"].missing_gpu_backend() is not None,
        reason="needs JAX's CUDA plugin (jax[cuda13] or jax[cuda12])",
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
