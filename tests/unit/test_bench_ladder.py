from __future__ import annotations

from trainscale.bench import RungResult, Skipped, markdown_table, plan_ladder, table_rows
from trainscale.config.options import RunOptions


def _names(ladder):
    return [r.name for r in ladder]


def test_two_core_ladder_has_baseline_threads_pinned_and_pitfall():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    runnable = [r for r in ladder if not isinstance(r, Skipped)]
    assert runnable[0].options.parallel.threads_per_worker == 1 and runnable[0].cores == 1
    pinned = [
        r
        for r in runnable
        if r.options.parallel.workers == 2 and r.options.parallel.affinity == "compact"
    ]
    assert pinned and pinned[0].options.parallel.threads_per_worker == 1
    pitfall = [r for r in runnable if r.pitfall]
    assert pitfall[0].options.parallel.affinity == "none"
    assert pitfall[0].options.parallel.threads_per_worker == "torch-default"
    skipped = {r.name: r.reason for r in ladder if isinstance(r, Skipped)}
    assert "no native bf16" in skipped["bf16 autocast"]
    assert "no GPU" in skipped["1 GPU"]


def test_bf16_rung_only_with_native_bf16():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 4, bf16_native=True, num_gpus=0)
    bf16 = [
        r
        for r in ladder
        if not isinstance(r, Skipped) and r.options.optimisation.precision == "bf16"
    ]
    assert len(bf16) == 1 and bf16[0].options.parallel.workers == 4


def test_single_core_machine_has_only_the_baseline():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 1, bf16_native=False, num_gpus=0)
    assert len([r for r in ladder if not isinstance(r, Skipped)]) == 1


def _result(sps, world=1, threads=1, acc=None, ttt=None):
    return {
        "samples_per_s": sps,
        "world_size": world,
        "threads_per_worker": threads,
        "step_time_s_median": 128 / sps,
        "step_time_s_iqr": 0.01 * 128 / sps,
        "test_accuracy": acc,
        "time_to_target_s": ttt,
    }


def test_table_speedup_and_efficiency_against_the_first_rung():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    results = [
        RungResult(ladder[0], _result(500.0)),
        RungResult(ladder[1], _result(900.0, 1, 2)),
        RungResult(ladder[2], error="boom"),
        RungResult(ladder[3]),
    ]
    rows = table_rows(results)
    assert rows[0]["speedup"] == "1.00x" and rows[1]["speedup"] == "1.80x"
    assert rows[1]["efficiency"].startswith("90%")
    assert rows[2]["note"] == "failed: boom"
    assert rows[3]["note"].startswith("skipped:")
    md = markdown_table(rows)
    assert md.count("\n") == len(rows) + 1 and "| setting |" in md
