"""A user's own script on a GPU: `trainscale run SCRIPT.py --device cuda` with one worker,
the script saying plain "cuda" and landing on its worker's GPU, its steps timed with CUDA
events read as the device passes them (before any evaluation), its peak GPU memory and its
GPU stored as a built-in GPU run's; with two workers and no process group, the line names
NCCL. Skipped without CUDA."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SCRIPT = """\
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

import trainscale

device = torch.device("cuda")  # plain "cuda", as many scripts say: the worker's GPU
model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(device)
if int(os.environ["WORLD_SIZE"]) > 1:
    torch.distributed.init_process_group("nccl")
    model = nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
inputs, labels = torch.randn(40 * 128, 512), torch.randint(0, 10, (40 * 128,))
meter = trainscale.meter()
for step in range(40):
    x = inputs[step * 128 : (step + 1) * 128].to(device)
    y = labels[step * 128 : (step + 1) * 128].to(device)
    with meter.step(samples=len(x)):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
read_before_evaluate = len(meter.measurements.step_times_s)  # no synchronisation yet
with torch.no_grad():
    accuracy = (model(x).argmax(1) == y).float().mean().item()
meter.evaluate(accuracy=accuracy)
seen = {
    "current": torch.cuda.current_device(),
    "local_rank": int(os.environ["LOCAL_RANK"]),
    "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "clock": type(meter.clock).__name__,
    "read_before_evaluate": read_before_evaluate,
}
with open(f"{sys.argv[1]}.{os.environ['RANK']}", "w") as out:
    json.dump(seen, out)
if torch.distributed.is_initialized():
    torch.distributed.destroy_process_group()
"""


def test_a_script_on_one_gpu_is_timed_on_the_device(tmp_path: Path) -> None:
    script, seen, store = tmp_path / "train.py", tmp_path / "seen.json", tmp_path / "s.db"
    script.write_text(SCRIPT)
    args = ["run", str(script), "--device", "cuda", "--workers", "1", "--data", "synthetic"]
    code = run_cli(
        [*args, "--warmup-steps", "2", "--quiet", "--store", str(store), "--", str(seen)]
    )
    assert code == 0
    with RunStore(store) as opened:
        (run,) = opened.list_runs()
        step_times = opened.step_times(run.run_id)
    assert run.status == "completed" and run.config["device"] == "cuda"
    assert len(step_times) == 40 and min(step_times) > 0
    # One mark per step boundary: the device's step times add up to the training clock.
    assert sum(step_times) == pytest.approx(run.summary["train_time_s"], rel=1e-6)
    assert 0 <= run.summary["data_wait_share"] < 1
    facts = json.loads(Path(f"{seen}.0").read_text())
    assert facts["current"] == facts["local_rank"] == 0
    # torchrun's environment as it is: the GPUs visible to the worker are not narrowed.
    assert facts["visible"] == os.environ.get("CUDA_VISIBLE_DEVICES")
    assert facts["clock"] == "DeviceClock"
    # The events the device had passed were read at the step ends, not all kept until the
    # script synchronised: the queue of marks stays short however long a script trains.
    assert facts["read_before_evaluate"] >= 1
    summary = run.summary
    # Peak GPU memory and the GPU, as a built-in GPU run stores them; the model's weights,
    # gradients and the batches at least (2 x 1.07M fp32 parameters, 8 MiB).
    (peak,) = summary["peak_gpu_memory_bytes_per_worker"]
    assert peak >= 8 * 2**20
    hardware = summary["hardware"]
    assert (hardware["device_type"], hardware["devices"]) == ("cuda", 1)
    assert hardware["device"] == torch.cuda.get_device_name(0)
    # A script gives no FLOPs: no MFU, and the summary says why.
    assert summary["mfu"] is None and summary["achieved_tflops"] is None
    assert summary["mfu_unknown"]


ALONE = """\
import torch
import trainscale

x = torch.ones(4, device="cuda")
meter = trainscale.meter()
for _ in range(1000):
    with meter.step(samples=4):
        x = x * 2
"""


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_gpu_workers_without_a_process_group_are_told_to_use_nccl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, store = tmp_path / "alone.py", tmp_path / "s.db"
    script.write_text(ALONE)
    capsys.readouterr()
    args = ["run", str(script), "--device", "cuda", "--workers", "2", "--data", "synthetic"]
    assert run_cli([*args, "--store", str(store), "--"]) == 1
    line = one_error_line(capsys)
    assert "without a process group" in line and 'init_process_group("nccl")' in line
    assert "device_ids=[local_rank]" in line and "gloo" not in line


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_each_worker_lands_on_its_own_gpu(tmp_path: Path) -> None:
    script, seen, store = tmp_path / "train.py", tmp_path / "seen.json", tmp_path / "s.db"
    script.write_text(SCRIPT)
    args = ["run", str(script), "--device", "cuda", "--workers", "2", "--data", "synthetic"]
    assert run_cli([*args, "--quiet", "--store", str(store), "--", str(seen)]) == 0
    for rank in (0, 1):
        facts = json.loads(Path(f"{seen}.{rank}").read_text())
        assert facts["current"] == facts["local_rank"] == rank, facts
        assert facts["clock"] == "DeviceClock"
    with RunStore(store) as opened:
        (run,) = opened.list_runs()
    assert (run.status, run.world_size, run.config["device"]) == ("completed", 2, "cuda")
