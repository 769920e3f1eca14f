"""A script run's GPU figures, as far as a CPU can check them (torch.cuda faked): each
worker's peak GPU memory where its script used CUDA, and the run's hardware entry (its
GPUs, no FLOP/s or MFU: a script gives no FLOPs), stored and shown by `runs show` as a
built-in GPU run's are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from trainscale.config.options import RunOptions
from trainscale.hardware import figures
from trainscale.hardware.peaks import match_gpu
from trainscale.reporting.listing import RunDetails
from trainscale.results.store import RunStore
from trainscale.runner.record import (
    SCRIPT_MFU_UNKNOWN,
    create_script_row,
    new_run_id,
    store_script_outcome,
)
from trainscale.runner.script_launch import prepare_script
from trainscale.runner.script_worker import peak_gpu_bytes
from trainscale.train.meter import ScriptMeasurements
from trainscale.train.script_summary import summarize_script

GPU = "NVIDIA H100 80GB HBM3"
MIB = 2**20


def _cuda(monkeypatch: pytest.MonkeyPatch, initialized: bool, peaks: dict[int, int]) -> None:
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(peaks))

    def max_memory_allocated(device: int) -> int:
        assert initialized, "asked without CUDA: that would initialise it"
        return peaks[device]

    monkeypatch.setattr(torch.cuda, "max_memory_allocated", max_memory_allocated)


def test_a_worker_reports_its_gpu_peak_only_where_its_script_used_cuda(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _cuda(monkeypatch, initialized=False, peaks={0: 0, 1: 0})
    assert peak_gpu_bytes() is None  # a CPU script: no GPU figure, and no CUDA started
    # On whichever GPU the script allocated (here the second one, not the current one).
    _cuda(monkeypatch, initialized=True, peaks={0: 0, 1: 300 * MIB})
    assert peak_gpu_bytes() == 300 * MIB


def _measured() -> ScriptMeasurements:
    return ScriptMeasurements(step_times_s=[1.0] * 3, data_wait_s=[0.0] * 3, samples=[8] * 3)


def _worker(rank: int, **more: Any) -> dict[str, Any]:
    facts = {"rank": rank, "peak_rss_bytes": MIB, "cores": [rank], "torch_threads": 1}
    return {**facts, "hostname": "node", "addr": "127.0.0.1", **more}


def test_the_summary_has_every_rank_s_gpu_peak_where_any_rank_used_cuda() -> None:
    # A rank whose script never initialised CUDA held no GPU memory.
    workers = [_worker(0, peak_gpu_bytes=512 * MIB), _worker(1)]
    summary = summarize_script([_measured(), _measured()], workers, 0, None)
    assert summary.metrics.peak_gpu_memory_bytes_per_worker == [512 * MIB, 0]
    on_cpu = summarize_script([_measured()], [_worker(0)], 0, None)
    assert on_cpu.metrics.peak_gpu_memory_bytes_per_worker is None


def _stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: str, workers: list[dict[str, Any]]
) -> RunDetails:
    """The run stored through what rank 0 calls, and read back as `runs show` reads it."""
    script = tmp_path / "train.py"
    script.write_text("import trainscale\ntrainscale.meter()\n")
    options = RunOptions.of(
        "train.py", device=device, workers=len(workers), allow_oversubscribe=True
    )
    run = prepare_script(str(script), [], options)
    # The row's environment is the parent's, which a faked GPU cannot describe: none here.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    summary = summarize_script([_measured() for _ in workers], workers, 0, None)
    run_id = new_run_id()
    with RunStore(tmp_path / "runs.db") as store:
        create_script_row(store, run_id, run)
        store_script_outcome(store, run_id, run, summary, workers)
        return RunDetails(store.get_run(run_id), [])


def test_a_gpu_script_run_stores_and_shows_its_gpus_and_their_peak_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cuda(monkeypatch, initialized=True, peaks={0: 512 * MIB, 1: 256 * MIB})
    monkeypatch.setattr(figures, "cuda_device", lambda: GPU)
    workers = [_worker(0, peak_gpu_bytes=512 * MIB), _worker(1, peak_gpu_bytes=256 * MIB)]
    details = _stored(tmp_path, monkeypatch, "cuda", workers)
    summary = details.record.summary
    entry = match_gpu(GPU)
    assert entry is not None
    # The devices, as a built-in GPU run stores them: what a report prices.
    assert summary["hardware"] == {
        "device_type": "cuda",
        "device": GPU,
        "devices": 2,
        "kind": entry.kind,
    }
    assert summary["peak_gpu_memory_bytes_per_worker"] == [512 * MIB, 256 * MIB]
    # No FLOPs from a script: no achieved FLOP/s, no peak matched to an unknown precision.
    nothing = ("achieved_tflops", "mfu", "mfu_peak", "mfu_vs_probe")
    assert all(summary[key] is None for key in nothing)
    assert summary["mfu_unknown"] == SCRIPT_MFU_UNKNOWN
    shown = details.summary()  # `trainscale runs show`'s summary lines
    assert shown["peak_gpu_memory_bytes_per_worker"] == "512.0 MiB, 256.0 MiB"
    assert f'"device": "{GPU}"' in shown["hardware"] and '"devices": 2' in shown["hardware"]
    assert shown["mfu"] == "-" and shown["mfu_unknown"].startswith("not known")


def test_a_cpu_script_run_stores_the_cores_its_workers_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    details = _stored(tmp_path, monkeypatch, "cpu", [_worker(0), _worker(1)])
    summary = details.record.summary
    assert summary["hardware"]["device_type"] == "cpu"
    assert summary["hardware"]["devices"] == 2  # one pinned core each
    assert summary["hardware"]["kind"] == "cpu-core"
    assert summary["peak_gpu_memory_bytes_per_worker"] is None
    assert summary["mfu_peak"] is None and summary["mfu"] is None
