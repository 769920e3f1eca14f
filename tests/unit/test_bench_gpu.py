"""The bench's GPU rungs on a CPU-only machine: the GPU count and bf16 support are faked,
the runs stood in for; the verdict line is formed from paired rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainscale.benchmark import RungResult, Skipped, plan_ladder, run_bench, table_rows
from trainscale.benchmark.ladder import SAME_RECIPE_NOTE, Rung
from trainscale.benchmark.options import BenchOptions
from trainscale.benchmark.table import gpu_line, gpu_lines
from trainscale.cli import main
from trainscale.config.options import RunOptions
from trainscale.hardware.precision_choice import gpus_bf16_native
from trainscale.metrics.paired import NO_DIFFERENCE, paired_ratio

from tests.helpers.jax_plugin import pretend_jax_cuda_plugin

BASE = RunOptions.of(workload="mnist-cnn", global_batch_size=64, precision="fp32")


def _gpu_rungs(ladder: list[Rung | Skipped]) -> list[Rung]:
    return [r for r in ladder if isinstance(r, Rung) and r.gpus]


def test_two_gpus_with_native_bf16_add_four_gpu_rungs_on_cuda():
    ladder = plan_ladder(BASE, 16, bf16_native=False, num_gpus=2, cuda_bf16=True)
    rungs = {r.name: r for r in _gpu_rungs(ladder)}
    assert list(rungs) == [
        "1 GPU",
        "1 GPU, bf16",
        "2 GPUs, DDP over NCCL",
        "2 GPUs, DDP over NCCL, bf16",
    ]
    expected = {  # name: (workers, precision, host threads per worker)
        "1 GPU": (1, "fp32", 16),
        "1 GPU, bf16": (1, "bf16", 16),
        "2 GPUs, DDP over NCCL": (2, "fp32", 8),
        "2 GPUs, DDP over NCCL, bf16": (2, "bf16", 8),
    }
    for name, (workers, precision, threads) in expected.items():
        options = rungs[name].options
        assert options.parallel.device == "cuda"
        assert options.parallel.workers == workers and rungs[name].gpus == workers
        assert options.optimisation.precision == precision
        assert options.parallel.threads_per_worker == threads
        # The same recipe as the CPU rungs: the same global batch, said in the note.
        assert options.optimisation.global_batch_size == 64
        assert rungs[name].note == SAME_RECIPE_NOTE
    cpu = [r for r in ladder if isinstance(r, Rung) and not r.gpus]
    assert {r.options.parallel.device for r in cpu} == {"cpu"}


def test_one_gpu_without_native_bf16_has_one_gpu_rung_and_says_why_not_bf16():
    ladder = plan_ladder(BASE, 4, bf16_native=False, num_gpus=1, cuda_bf16=False)
    assert [(r.name, r.options.parallel.workers) for r in _gpu_rungs(ladder)] == [("1 GPU", 1)]
    skipped = {r.name: r.reason for r in ladder if isinstance(r, Skipped)}
    assert "no native bf16" in skipped["1 GPU, bf16"]


def test_no_gpu_keeps_the_skip_and_tensorflow_stays_on_the_cpu():
    ladder = plan_ladder(BASE, 4, bf16_native=False, num_gpus=0, cuda_bf16=True)
    assert not _gpu_rungs(ladder)
    assert {r.name: r.reason for r in ladder if isinstance(r, Skipped)}["1 GPU"] == (
        "no GPU on this machine"
    )
    tf = plan_ladder(BASE.with_(framework="tensorflow"), 4, False, 2, True)
    assert not _gpu_rungs(tf)
    assert "CPU only" in next(r.reason for r in tf if r.name == "1 GPU")


def test_jax_gpu_rungs_train_in_jax_over_jax_distributed(monkeypatch):
    pretend_jax_cuda_plugin(monkeypatch, installed=True)
    ladder = plan_ladder(BASE.with_(framework="jax"), 8, False, 2, False)
    names = [r.name for r in _gpu_rungs(ladder)]
    assert names == ["1 GPU", "2 GPUs, jax.distributed over NCCL"]
    assert {r.options.parallel.framework for r in _gpu_rungs(ladder)} == {"jax"}


def test_jax_without_its_cuda_plugin_has_no_gpu_rung_and_says_what_to_install(monkeypatch):
    pretend_jax_cuda_plugin(monkeypatch, installed=False)
    ladder = plan_ladder(BASE.with_(framework="jax"), 8, False, 2, False)
    assert not _gpu_rungs(ladder)
    reason = next(r.reason for r in ladder if isinstance(r, Skipped) and r.name == "1 GPU")
    assert "no CUDA backend" in reason and "jax[cuda" in reason


def test_gpu_bf16_is_native_from_ampere_on():
    assert gpus_bf16_native([{"capability": "9.0"}, {"capability": "8.0"}])
    assert not gpus_bf16_native([{"capability": "9.0"}, {"capability": "7.5"}])
    assert not gpus_bf16_native([])
    assert not gpus_bf16_native([{"name": "no capability"}])


def _rounds(cpu: list[float], gpu: list[float]) -> list[dict[str, float | None]]:
    return [{"cpu best": c, "1 GPU": g} for c, g in zip(cpu, gpu, strict=True)]


def test_gpu_line_says_faster_with_the_paired_interval():
    ratio = paired_ratio(
        _rounds([100, 110, 90, 105, 95], [940, 1020, 860, 990, 900]), "cpu best", "1 GPU"
    )
    line = gpu_line(ratio)
    assert line.startswith(f"1 GPU: {ratio.text()} faster than the fastest CPU setting here")
    assert "(cpu best; 5 rounds)" in line
    assert ratio.median is not None and 9.0 < ratio.median < 9.6


def test_gpu_line_without_a_clear_difference_gives_no_verdict():
    ratio = paired_ratio(_rounds([100, 100, 100], [90, 110, 101]), "cpu best", "1 GPU")
    line = gpu_line(ratio)
    assert line.endswith(f": {NO_DIFFERENCE}") and "faster" not in line
    assert "with fewer than 5 rounds the interval is wide" in line


def test_gpu_line_with_no_round_measuring_both():
    ratio = paired_ratio(_rounds([100, 100], [None, None]), "cpu best", "1 GPU")  # type: ignore[list-item]
    assert gpu_line(ratio).startswith("1 GPU: cannot tell against the fastest CPU setting")


def _run(sps: float, workers: int = 1) -> dict:
    return {
        "samples_per_s": sps,
        "world_size": workers,
        "threads_per_worker": 1,
        "step_time_s_median": 64 / sps,
        "step_time_s_iqr": 0.0,
    }


def test_gpu_lines_pair_each_gpu_rung_with_the_fastest_sound_cpu_rung():
    ladder = plan_ladder(BASE, 2, bf16_native=False, num_gpus=1, cuda_bf16=True)
    by_name = {r.name: r for r in ladder}
    speeds = {  # per round; the pitfall is fastest but is no setting to recommend
        "serial 1 core (baseline)": [100.0, 100.0],
        "1 process, 2 threads": [150.0, 160.0],
        "2 pinned workers x 1 thread": [190.0, 200.0],
        "naive DDP: 2 unpinned workers, torch-default threads": [400.0, 400.0],
        "1 GPU": [1900.0, 2200.0],
        "1 GPU, bf16": [3800.0, 4000.0],
    }
    results = [
        RungResult(by_name[name], [_run(s) for s in rates]) for name, rates in speeds.items()
    ]
    lines = gpu_lines(results)
    assert lines[0].startswith("1 GPU: 10.50x [10.00, 11.00] faster than the fastest CPU")
    assert "(2 pinned workers x 1 thread; 2 rounds" in lines[0]
    assert lines[1].startswith("1 GPU, bf16: ")
    rows = {row["setting"]: row for row in table_rows(results)}
    assert rows["1 GPU"]["efficiency"] == "-"  # no speedup per core for a GPU
    assert rows["2 pinned workers x 1 thread"]["efficiency"] != "-"
    assert SAME_RECIPE_NOTE in rows["1 GPU"]["note"]


@pytest.fixture
def faked_gpu(monkeypatch, tmp_path: Path) -> list[tuple[str, str, int | None]]:
    """One faked GPU beside two cores, runs stood in for (a GPU run 20x a CPU one); returns
    the (device, precision, round) of each run made."""
    env = {
        "cpu_model": "Test CPU",
        "usable_cores": [0, 1],
        "bf16_native": False,
        "gpus": [{"index": 0, "name": "Test GPU", "capability": "9.0"}],
        "torch_version": "2.x",
    }
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("trainscale.hardware.facts.collect_environment", lambda *a, **k: env)
    seen: list[tuple[str, str, int | None]] = []

    def execute_run(options, store_path=None, *args, repeat_index=None, **kwargs):
        par = options.parallel
        seen.append((par.device, options.optimisation.precision, repeat_index))
        rate = 100.0 * par.workers * (20 if par.device == "cuda" else 1)
        return {"run_id": f"r{len(seen)}", **_run(rate, par.workers)}

    monkeypatch.setattr("trainscale.runner.launch.execute_run", execute_run)
    return seen


def test_bench_with_a_faked_gpu_measures_it_in_the_rounds(faked_gpu, tmp_path: Path):
    result = run_bench("mnist-cnn", options=BenchOptions(quick=True), data="synthetic", out="t.md")
    # Every round measures both GPU rungs, in the same rotated rounds as the CPU rungs.
    for index in range(result.rounds):
        assert {(d, p) for d, p, r in faked_gpu if r == index and d == "cuda"} == {
            ("cuda", "fp32"),
            ("cuda", "bf16"),
        }
    assert result.gpu_lines and all(
        "faster than the fastest CPU setting here" in line for line in result.gpu_lines
    )
    text = (tmp_path / "t.md").read_text()
    assert f"- {result.gpu_lines[0]}" in text and "1 GPU (Test GPU)" in text


def test_the_bench_command_says_the_gpu_verdicts_in_its_table_and_its_json(
    faked_gpu, capsys, monkeypatch
):
    args = ["bench", "--quick", "--data", "synthetic", "--max-extra-rounds", "0"]
    assert main([*args, "--out", "t.md"]) == 0
    printed = capsys.readouterr().out
    verdicts = [line.strip() for line in printed.splitlines() if "fastest CPU setting" in line]
    assert [v.split(":")[0] for v in verdicts] == ["1 GPU", "1 GPU, bf16"], printed
    assert all("10.00x [10.00, 10.00] faster than" in v for v in verdicts)  # 20x vs 2 workers

    # The stood-in runs are not stored: the document's reads of the store are left out.
    monkeypatch.setattr("trainscale.benchmark.document.bench_runs", lambda *a: [])
    monkeypatch.setattr("trainscale.benchmark.document.bench_configurations", lambda *a: [])
    assert main([*args, "--out", "j.md", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [v.split(":")[0] for v in document["gpu_verdicts"]] == ["1 GPU", "1 GPU, bf16"]
    assert document["gpu_verdicts"] == verdicts
    assert [row["setting"] for row in document["table"] if "GPU" in row["setting"]] == [
        "1 GPU",
        "1 GPU, bf16",
    ]
