from __future__ import annotations

import pytest

from trainscale.benchmark import RungResult, Skipped, markdown_table, plan_ladder, table_rows
from trainscale.benchmark.ladder import rotation
from trainscale.config.options import RunOptions
from trainscale.metrics.paired import NO_DIFFERENCE, paired_ratio


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
        RungResult(ladder[0], [_result(500.0)]),
        RungResult(ladder[1], [_result(900.0, 1, 2)]),
        RungResult(ladder[2], [None], ["boom"]),
        RungResult(ladder[3]),
    ]
    rows = table_rows(results)
    assert rows[0]["speedup"] == "1.00x" and rows[1]["speedup"] == "1.80x"
    assert rows[1]["efficiency"].startswith("90%")
    assert rows[2]["note"] == "failed: boom"
    assert rows[3]["note"].startswith("skipped:")
    md = markdown_table(rows)
    assert md.count("\n") == len(rows) + 1 and "| setting |" in md


def test_rounds_rotate_so_no_rung_always_runs_first():
    assert rotation(["A", "B", "C"], 4) == [
        ["A", "B", "C"],
        ["B", "C", "A"],
        ["C", "A", "B"],
        ["A", "B", "C"],
    ]
    assert rotation(["A"], 2) == [["A"], ["A"]]
    assert rotation([], 2) == [[], []]


def test_the_pitfall_names_the_pinned_rung_it_is_compared_with():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    pitfall = next(r for r in ladder if not isinstance(r, Skipped) and r.pitfall)
    assert pitfall.pitfall_of == "2 pinned workers x 1 thread"
    assert pitfall.pitfall_of in [r.name for r in ladder]


# Five rounds on a machine whose speed drifts: the serial rung does 500, 400, 600, 450 and
# 550 samples/s. Within each round the pinned workers do 1.6x, 1.7x, 1.5x, 1.6x and 1.7x
# the serial rung; the threads rung wanders around it; the naive rung does half the pinned.
SERIAL = [500.0, 400.0, 600.0, 450.0, 550.0]
PINNED = [1.6, 1.7, 1.5, 1.6, 1.7]
THREADS = [0.8, 1.3, 0.9, 1.2, 1.05]
NAIVE = [0.8, 0.85, 0.75, 0.8, 0.85]


def _rounds(factors, world=1, threads=1):
    return [_result(s * f, world, threads) for s, f in zip(SERIAL, factors, strict=True)]


def _five_rounds():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    return ladder, [
        RungResult(ladder[0], _rounds([1.0] * 5)),
        RungResult(ladder[1], _rounds(THREADS, 1, 2)),
        RungResult(ladder[2], _rounds(PINNED, 2, 1)),
        RungResult(ladder[3]),
        RungResult(ladder[4], _rounds(NAIVE, 2, 2)),
    ]


def test_table_speedup_is_paired_within_rounds_with_an_interval_and_a_verdict():
    ladder, results = _five_rounds()
    rows = {row["setting"]: row for row in table_rows(results)}
    serial, threads, pinned = (rows[r.name] for r in ladder[:3])
    assert serial["speedup"] == "1.00x" and serial["verdict"] == "baseline"
    rounds = [{"A": s, "B": s * f} for s, f in zip(SERIAL, PINNED, strict=True)]
    expected = paired_ratio(rounds, "A", "B")
    assert expected.median == pytest.approx(1.6)
    assert pinned["speedup"] == f"1.60x [{expected.ci[0]:.2f}, {expected.ci[1]:.2f}]"
    assert pinned["verdict"] == "faster than serial"
    assert pinned["efficiency"] == "80% of 2 core(s)"
    # samples/s is the median over the rounds (800, 680, 900, 720, 935), not one round's.
    assert pinned["samples/s"] == "800"
    assert threads["speedup"].startswith("1.05x [") and threads["verdict"] == NO_DIFFERENCE
    assert rows[ladder[4].name]["verdict"] == "slower than serial"


def test_the_pinned_rung_is_compared_with_the_naive_one_paired():
    from trainscale.benchmark.table import pitfall_comparisons

    _, results = _five_rounds()
    (pinned_vs_naive,) = pitfall_comparisons(results)
    assert pinned_vs_naive.b == "2 pinned workers x 1 thread"
    assert pinned_vs_naive.a.startswith("naive DDP")
    assert pinned_vs_naive.ratios == pytest.approx((2.0,) * 5)
    assert pinned_vs_naive.verdict_against("the naive setting") == "faster than the naive setting"


def test_a_failed_round_leaves_the_rung_paired_over_the_other_rounds():
    ladder, results = _five_rounds()
    results[2].runs[1] = None  # pinned failed in round 1
    results[2].errors.append("worker 1 crashed")
    results[0].runs[3] = None  # serial failed in round 3
    results[0].errors.append("killed")
    rows = {row["setting"]: row for row in table_rows(results)}
    pinned = rows[ladder[2].name]
    # Rounds 0, 2 and 4 remain for pinned vs serial: ratios 1.6, 1.5, 1.7.
    assert pinned["speedup"] == "1.60x [1.50, 1.70]"
    assert "failed in 1 of 5 rounds: worker 1 crashed" in pinned["note"]


def test_few_rounds_are_said_to_give_a_wide_interval():
    from trainscale.benchmark.run import BenchResult

    ladder, results = _five_rounds()
    for item in results:
        del item.runs[3:]
    env = {"cpu_model": "Test CPU", "usable_cores": [0, 1], "torch_version": "2.x"}
    env["bf16_native"] = False
    bench = BenchResult("b1", "mnist-cnn", env, RunOptions.of(workload="mnist-cnn"), 30, 64, 3)
    bench.results = results
    text = bench.markdown()
    assert "3 round(s): with fewer than 5 rounds the interval is wide" in text
    assert "train 10 steps a run" in text and "in 3 round(s) (--steps 30" in text
    assert "- 2 pinned workers x 1 thread vs naive DDP" in text
    assert "(3 rounds: with fewer than 5 rounds the interval is wide)" in text


@pytest.mark.parametrize(("cores", "workers"), [(3, 2), (6, 4), (12, 8), (24, 16), (48, 32)])
def test_cores_that_do_not_split_the_batch_get_as_many_workers_as_do(cores, workers):
    # MNIST's recipe batch is 64: one worker per core would not train the same batch.
    base = RunOptions.of(workload="mnist-cnn", global_batch_size=64, precision="fp32")
    ladder = plan_ladder(base, cores, bf16_native=True, num_gpus=3, cuda_bf16=True)
    parallel = [r for r in ladder if not isinstance(r, Skipped) and r.options.parallel.workers > 1]
    cpu = [r for r in parallel if r.options.parallel.device == "cpu"]
    assert {r.options.parallel.workers for r in cpu} == {workers}
    pinned = next(r for r in cpu if not r.pitfall and r.options.optimisation.precision == "fp32")
    assert pinned.name == f"{workers} pinned workers x 1 thread" and pinned.cores == workers
    assert f"the global batch 64 does not split evenly over {cores}" in pinned.note
    # Three GPUs train on two, and the third's absence is said.
    gpus = {r.options.parallel.workers for r in parallel if r.options.parallel.device == "cuda"}
    assert gpus == {2}
    skipped = {r.name: r.reason for r in ladder if isinstance(r, Skipped)}
    assert "2 GPUs instead" in skipped["3 GPUs"]


def test_a_rung_of_one_timed_step_shows_no_spread_rather_than_a_steady_zero():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    one_step = {**_result(500.0), "step_time_s_iqr": None}  # as a run of one timed step stores
    rows = table_rows([RungResult(ladder[0], [one_step]), RungResult(ladder[1], [_result(900.0)])])
    assert rows[0]["step ms (median, IQR)"] == "256.0 (-)"
    assert rows[1]["step ms (median, IQR)"] == "142.2 (1%)"
