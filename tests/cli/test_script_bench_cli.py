"""`trainscale bench SCRIPT.py -- ARGS` end to end: the example script through the CPU ladder,
every rung a script run stopped by the meter after the bench's steps (the script's own loop
would train longer), stored with the bench's tag and round; options a script decides refused
in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist_script.py"
SMALL = ["--train-samples", "512", "--test-samples", "64"]
"""An epoch of 8 steps on one worker (4 on each of two): longer than the bench's 3."""


def test_each_rung_runs_the_script_and_is_stopped_after_the_benchs_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, out = tmp_path / "runs.db", tmp_path / "bench.md"
    bench = [
        "bench",
        str(EXAMPLE),
        "--quick",
        "--steps",
        "3",
        "--rounds",
        "1",
        "--max-extra-rounds",
        "0",
    ]
    options = ["--data", "synthetic", "--store", str(store), "--out", str(out)]
    assert run_cli([*bench, *options, "--", *SMALL]) == 0
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err
    assert "serial 1 core (baseline)" in printed.out
    assert "the script decides its precision" in printed.out  # no bf16 rung
    with RunStore(store) as opened:
        runs = opened.list_runs()
    assert runs, "no rung ran"
    (tag,) = {run.tag for run in runs}
    assert tag.startswith("bench:")
    for run in runs:
        assert (run.status, run.workload, run.data_kind) == (
            "completed",
            "script:mnist_script.py",
            "synthetic",
        )
        assert (run.repeat_index, run.config["max_steps"]) == (0, 3)
        assert run.summary["steps_per_worker"] == [3] * run.world_size  # every rank stopped
        assert run.summary["global_batch_measured"] == 64 * run.world_size  # the script's own
    assert {run.world_size for run in runs} == ({1, 2} if len(runs) > 2 else {1})
    assert "each run of the script stopped by the meter" in out.read_text()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--framework", "jax"], "--framework does not apply to a script bench"),
        (["--data-dir", "."], "--data-dir does not apply to a script bench"),
        (["--workload", "mnist-cnn"], "give one workload or script to bench"),
    ],
)
def test_options_a_script_decides_are_one_line_and_store_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], expected: str
) -> None:
    store = tmp_path / "runs.db"
    capsys.readouterr()
    args = ["bench", str(EXAMPLE), *flags, "--store", str(store), "--out", str(tmp_path / "b.md")]
    assert run_cli([*args, "--", *SMALL]) == 2
    assert expected in one_error_line(capsys)
    with RunStore(store) as opened:
        assert opened.list_runs() == []


def test_a_scripts_ladder_has_no_bf16_rung_and_says_why() -> None:
    from trainscale.benchmark.ladder import Rung, Skipped, plan_ladder
    from trainscale.config.options import RunOptions

    ladder = plan_ladder(RunOptions.of(str(EXAMPLE)), 4, True, 2, True, script=True)
    skipped = {rung.name: rung.reason for rung in ladder if isinstance(rung, Skipped)}
    why = "the script decides its precision (it may autocast itself): no bf16 rung"
    assert skipped == {
        "bf16 autocast": why,
        "1 GPU, bf16": why,
        "2 GPUs, DDP over NCCL, bf16": why,
    }
    rungs = [rung for rung in ladder if isinstance(rung, Rung)]
    # GPU rungs are script runs on cuda (tests/unit/test_script_bench_gpu.py), the rest on the CPU.
    assert all((rung.options.parallel.device == "cuda") == bool(rung.gpus) for rung in rungs)
    # The script's precision stays its own: no rung sets one.
    default = RunOptions.of(str(EXAMPLE)).flat()["precision"]
    assert all(rung.options.flat()["precision"] == default for rung in rungs)


def test_the_api_takes_a_script_and_refuses_what_it_decides(tmp_path: Path) -> None:
    import trainscale
    from trainscale.errors import ConfigError

    store = tmp_path / "runs.db"
    with pytest.raises(ConfigError, match="--framework does not apply to a script bench"):
        trainscale.bench(script=EXAMPLE, script_args=SMALL, framework="jax", store=store)
    with pytest.raises(ConfigError, match="a workload or script=..., not both"):
        trainscale.bench("mnist-cnn", script=EXAMPLE, store=store)
