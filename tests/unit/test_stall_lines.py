"""A stalled run's mean and median step in `trainscale run`'s summary lines and the bench
table, in the words the sweep table, report and compare use (`metrics.run_flags`)."""

from __future__ import annotations

from trainscale.benchmark import RungResult, plan_ladder, table_rows
from trainscale.cli.run_cmd import format_result
from trainscale.config.options import RunOptions

STALLED = {"step_time_s_median": 0.033, "step_time_s_mean": 0.1206}


def _result(**changes):
    result = {
        "run_id": "abcdef0123",
        "workload": "mnist-cnn",
        "status": "completed",
        "data": "synthetic",
        "world_size": 1,
        "threads_per_worker": 1,
        "affinity": "compact",
        "precision": "fp32",
        "global_batch_size": 64,
        "samples_per_s": 64 / 0.033,
        "samples_per_s_mean": 64 / 0.0335,
        "step_time_s_median": 0.033,
        "step_time_s_mean": 0.0335,
        "step_time_s_iqr": 0.001,
        "test_accuracy": None,
        "time_to_target_s": None,
    }
    return {**result, **changes}


def test_run_summary_names_a_stall_with_both_steps():
    text = format_result(_result(**STALLED, samples_per_s_mean=64 / 0.1206))
    assert "throughput 1939.4 samples/s, median step 33.0 ms" in text
    assert "stalls: mean step 120.6 ms vs median 33.0 ms (530.7 samples/s on the mean)" in text
    assert "stalls" not in format_result(_result())


def test_run_summary_says_where_a_profiled_runs_files_are():
    text = format_result(_result(config={"profile": "prof", "profile_steps": 20}))
    assert text.endswith("\n  profiled: prof/rank*.{trace.json.gz,ops.txt,steps.txt}")
    assert "profiled" not in format_result(_result(config={"profile": None}))


def test_bench_table_notes_a_stalled_rung():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    rows = table_rows(
        [RungResult(ladder[0], [_result()]), RungResult(ladder[1], [_result(**STALLED)])]
    )
    assert "stalls" not in rows[0]["note"]
    assert "stalls: mean step 120.6 ms vs median 33.0 ms" in rows[1]["note"]


def test_bench_stall_note_quotes_the_stalled_rounds_own_mean_and_median():
    """A rung's row shows the median step over its rounds; the note beside it quotes the
    stalled round's own mean and median, as every table does (the row's median beside
    another round's mean could read as a mean below its median)."""
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    stalled = _result(step_time_s_median=0.050, step_time_s_mean=0.1206)
    rung = RungResult(ladder[1], [_result(), stalled, _result()])
    row = table_rows([RungResult(ladder[0], [_result()]), rung])[1]
    assert row["step ms (median, IQR)"].startswith("33.0 ")
    assert "stalls: mean step 120.6 ms vs median 50.0 ms in 1 of 3 runs" in row["note"]


def test_bench_says_which_baseline_answers_which_question():
    """Against 1 core and against 1 process x all cores as threads, each naming its
    baseline: the same setting can be faster than one and slower than the other."""
    from trainscale.benchmark.table import baseline_lines

    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    serial, threads, pinned = ladder[0], ladder[1], ladder[2]

    def rounds(rate: float) -> list:
        return [_result(samples_per_s=rate, run_id=f"r{i}") for i in range(3)]

    lines = baseline_lines(
        [
            RungResult(serial, rounds(1000.0)),
            RungResult(threads, rounds(200.0)),  # threads hurt this small model
            RungResult(pinned, rounds(500.0)),
        ]
    )
    assert lines[0].startswith(f"speedup, verdict and efficiency: against '{serial.name}'")
    assert lines[1].startswith(
        f"against '{threads.name}' (the layout `trainscale run` uses by default, in fp32)"
    )
    assert f"{pinned.name} 2.50x" in lines[1]  # 500 / 200: while 0.50x against one core
    assert "not trusted" not in lines[1]

    # Every round busy: the figure is shown, marked as the table marks it (the busy rule).
    busy = {"contention": {"verdict": "busy"}}

    def busy_rounds(rate: float) -> list:
        return [_result(samples_per_s=rate, run_id=f"b{i}", **busy) for i in range(3)]

    lines = baseline_lines(
        [
            RungResult(serial, busy_rounds(1000.0)),
            RungResult(threads, busy_rounds(200.0)),
            RungResult(pinned, busy_rounds(500.0)),
        ]
    )
    assert f"{pinned.name} 2.50x [2.50, 2.50] (not trusted: busy machine)" in lines[1]


def test_a_run_no_longer_than_its_warm_up_says_so_on_its_result_line():
    result = _result(config={"warmup_steps_untimed": 5}, num_steps=3, warmup_steps_excluded=0)
    assert "\n  every step timed: the run's 3 step(s) are no more than its 5" in format_result(
        result
    )
