"""The GPU rungs of the bench of a script, on a CPU-only machine: the ladder planned with GPUs,
and the bench path with the GPUs faked and the workers' launch stood in for, so that every
option a GPU rung sets goes through the script run's own checks (runner/script_launch.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainscale.benchmark import Rung, Skipped, plan_ladder, run_bench
from trainscale.benchmark.ladder import SCRIPT_GPU_NOTE, SCRIPT_NCCL_NOTE, SCRIPT_PRECISION
from trainscale.benchmark.options import BenchOptions
from trainscale.config.options import RunOptions
from trainscale.config.script import ScriptRun

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist_script.py"
BASE = RunOptions.of(str(EXAMPLE), data="synthetic", tag="bench:test")
SCRIPTS_PRECISION = BASE.optimisation.precision
"""A script run sets no precision: its options keep the default, which it may take."""


def _gpu_rungs(ladder: list[Rung | Skipped]) -> dict[str, Rung]:
    return {r.name: r for r in ladder if isinstance(r, Rung) and r.gpus}


@pytest.mark.parametrize("num_gpus", [1, 2])
def test_a_scripts_gpu_rungs_are_cuda_script_runs_in_its_own_precision(num_gpus: int) -> None:
    # Native bf16 on both CPU and GPU: a script still gets no bf16 rung anywhere.
    ladder = plan_ladder(BASE, 8, bf16_native=True, num_gpus=num_gpus, cuda_bf16=True, script=True)
    rungs = _gpu_rungs(ladder)
    expected = {"1 GPU": 1, "2 GPUs, DDP over NCCL": 2} if num_gpus == 2 else {"1 GPU": 1}
    assert {name: r.options.parallel.workers for name, r in rungs.items()} == expected
    for rung in rungs.values():
        par = rung.options.parallel
        assert (par.device, rung.gpus, par.affinity) == ("cuda", par.workers, "compact")
        assert par.threads_per_worker == 8 // par.workers  # the host cores, shared
        assert rung.options.optimisation.precision == SCRIPTS_PRECISION
        assert rung.note.startswith(SCRIPT_GPU_NOTE)
        # Only a multi-GPU rung needs the script's process group, over NCCL.
        assert (SCRIPT_NCCL_NOTE in rung.note) == (par.workers > 1)
    skipped = {r.name: r.reason for r in ladder if isinstance(r, Skipped)}
    assert skipped == {
        "bf16 autocast": SCRIPT_PRECISION,
        **{f"{name}, bf16": SCRIPT_PRECISION for name in expected},
    }


def test_a_scripts_ladder_without_gpus_says_so_as_a_workloads_does() -> None:
    ladder = plan_ladder(BASE, 2, bf16_native=False, num_gpus=0, script=True)
    assert not _gpu_rungs(ladder)
    assert {r.name: r.reason for r in ladder if isinstance(r, Skipped)}["1 GPU"] == (
        "no GPU on this machine"
    )


def _result(run: ScriptRun, run_id: str) -> dict[str, Any]:
    """A completed script run's dictionary: 20x faster on a GPU, scaling with workers."""
    par = run.parallel
    rate = 100.0 * par.workers * (20 if par.device == "cuda" else 1)
    return {
        "run_id": run_id,
        "samples_per_s": rate,
        "world_size": par.workers,
        "threads_per_worker": par.threads_per_worker,
        "step_time_s_median": 64 * par.workers / rate,
        "step_time_s_iqr": 0.0,
        "global_batch_size": 64 * par.workers,
        "precision": "script",
    }


def test_the_bench_of_a_script_runs_its_gpu_rungs_on_cuda_with_a_worker_per_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch

    from trainscale.hardware import facts

    real = facts.collect_environment()
    gpus = [{"index": i, "name": "Test GPU", "capability": "9.0"} for i in range(2)]
    env = {**real, "usable_cores": real["usable_cores"][:2], "gpus": gpus}
    monkeypatch.setattr(facts, "collect_environment", lambda *a, **k: dict(env))
    # What the script run's own check of `--device cuda` asks torch (runner/resolve.py).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    seen: list[tuple[str, int, int, int | None]] = []

    def launch_and_record(entrypoint, args, workers, store_file, run_id, sampler):
        sampler.stop()
        run: ScriptRun = args[0]  # the ScriptRun the rung's options became
        seen.append((run.parallel.device, run.parallel.workers, workers, run.max_steps))
        return _result(run, run_id)

    monkeypatch.setattr("trainscale.runner.script_launch.launch_and_record", launch_and_record)
    result = run_bench(
        options=BenchOptions(quick=True, steps=4, rounds=2, max_extra_rounds=0),
        script=EXAMPLE,
        data="synthetic",
        store=tmp_path / "runs.db",
        out=tmp_path / "bench.md",
    )
    # Every GPU rung ran in both rounds, as a cuda script run with a worker per GPU, stopped
    # by the meter after the bench's steps as the CPU rungs are.
    gpu_runs = [s for s in seen if s[0] == "cuda"]
    assert sorted(gpu_runs) == [("cuda", 1, 1, 2)] * 2 + [("cuda", 2, 2, 2)] * 2
    rows = {row["setting"]: row for row in result.rows}
    assert rows["1 GPU"]["samples/s"] == "2000" and rows["1 GPU"]["efficiency"] == "-"
    assert SCRIPT_NCCL_NOTE in rows["2 GPUs, DDP over NCCL"]["note"]
    assert rows["2 GPUs, DDP over NCCL, bf16"]["note"] == f"skipped: {SCRIPT_PRECISION}"
    # The same verdict lines as a workload's bench, against the fastest CPU setting.
    assert [line.split(":")[0] for line in result.gpu_lines] == ["1 GPU", "2 GPUs, DDP over NCCL"]
    assert all("faster than the fastest CPU setting here" in line for line in result.gpu_lines)
    text = (tmp_path / "bench.md").read_text()
    assert f"- {result.gpu_lines[0]}" in text
    assert "GPU settings run the script in its own global batch and precision" in text
