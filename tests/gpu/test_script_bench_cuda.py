"""`trainscale bench SCRIPT.py -- ARGS` on a GPU machine: the script's GPU rungs (1 GPU; N GPUs
over NCCL where there are several) run as cuda script runs in the rounds, and each gets the
verdict line against the fastest CPU setting. Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainscale.results.store import RunStore

from tests.helpers.cli import run_cli

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SCRIPT = """\
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import trainscale

# As scripts do: the GPU where torch sees one. A CPU rung hides the GPUs from its workers.
on_gpu = torch.cuda.is_available()
device = torch.device("cuda") if on_gpu else torch.device("cpu")
model: nn.Module = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(device)
if int(os.environ["WORLD_SIZE"]) > 1:
    dist.init_process_group("nccl" if on_gpu else "gloo")
    ids = [torch.cuda.current_device()] if on_gpu else None
    model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
if os.environ["RANK"] == "0":  # where each rung trained (the meter ends the script early)
    with open(sys.argv[1], "a") as seen:
        seen.write(f"{os.environ['WORLD_SIZE']} {device.type}\\n")
inputs, labels = torch.randn(64, 256), torch.randint(0, 10, (64,))
meter = trainscale.meter(model=model)
for _ in range(1000):  # the bench's meter stops it after the rung's steps
    x, y = inputs.to(device), labels.to(device)
    with meter.step(samples=len(x)):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
if dist.is_initialized():
    dist.destroy_process_group()
"""


def test_a_scripts_bench_measures_its_gpu_rungs_and_says_how_they_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], one_host_core: None
) -> None:
    # No extra rounds: the GPU check runs tests side by side, which a contention sampler
    # sees as a busy machine (the line is then marked, still printed).
    script, store, out = tmp_path / "train.py", tmp_path / "s.db", tmp_path / "bench.md"
    seen = tmp_path / "seen.txt"
    script.write_text(SCRIPT)
    bench = ["bench", str(script), "--quick", "--steps", "16", "--max-extra-rounds", "0"]
    options = ["--data", "synthetic", "--store", str(store), "--out", str(out)]
    code = run_cli([*bench, *options, "--", str(seen)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    gpus = torch.cuda.device_count()
    names = ["1 GPU"] + ([f"{gpus} GPUs, DDP over NCCL"] if gpus > 1 else [])
    text = out.read_text()
    for name in names:
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[2] != "-", f"the {name} rung did not run: {row}"  # samples/s
        assert "the script's own global batch and precision" in row
        # The verdict line: paired against the fastest CPU setting, written and printed.
        verdict = next(line for line in text.splitlines() if line.startswith(f"- {name}: "))
        assert "the fastest CPU setting here" in verdict
        assert f"{name}: " in captured.out
    with RunStore(store) as opened:
        cuda = [run for run in opened.list_runs() if run.config["device"] == "cuda"]
    # Every GPU rung in both rounds, completed, a worker per GPU, stopped by the meter.
    assert sorted(run.world_size or 0 for run in cuda) == sorted([*{1, gpus}] * 2)
    assert all(run.status == "completed" and run.config["max_steps"] == 8 for run in cuda)
    # The script trained on the GPU in the GPU rungs and on the CPU in the others.
    where = seen.read_text().splitlines()
    assert sorted(line for line in where if line.endswith("cuda")) == sorted(
        [f"{n} cuda" for n in {1, gpus}] * 2
    )
    assert len(where) - len(cuda) == 2 * 1  # the 1-core CPU ladder's one rung (serial), twice
