"""Runs stored as busy are marked wherever their figures are shown: the report (first note,
per-configuration notes, plots), the sweep summary and the bench table; the figures stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.benchmark.ladder import Rung, plan_ladder
from trainscale.benchmark.table import RungResult, table_rows
from trainscale.config.options import RunOptions
from trainscale.reporting.build import load_report_data
from trainscale.reporting.plots import _mark_busy
from trainscale.results.store import RunStore
from trainscale.sweeps.summary import sweep_summary

from tests.helpers.report_store import build_store, cpu_parallel_configs, run_id

SWEEP = "5eed0000"
BUSY = {"contention": {"verdict": "busy", "reason": "other processes used 0.60 cores"}}
QUIET = {"contention": {"verdict": "quiet", "reason": "other processes used 0.01 cores"}}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    with RunStore(path) as opened:
        # The serial baseline's first repeat and one repeat of the 4-thread setting: busy.
        assert opened.add_to_summary(run_id(0, 0), BUSY)
        assert opened.add_to_summary(run_id(1, 2), BUSY)
        assert opened.add_to_summary(run_id(1, 0), QUIET)
    return path


def _config(data, label):
    return next(c for c in data.configurations if c.label == label)


def test_add_to_summary_keeps_the_other_keys_and_only_touches_completed_runs(store):
    with RunStore(store) as opened:
        summary = opened.get_run(run_id(0, 0)).summary
        assert summary["contention"]["verdict"] == "busy"
        assert summary["samples_per_s"] == 100.0
        failed = next(r for r in opened.list_runs() if r.status == "failed")
        assert not opened.add_to_summary(failed.run_id, BUSY)
        assert "contention" not in opened.get_run(failed.run_id).summary


def test_report_says_first_how_many_runs_were_busy_and_marks_their_speedups(store):
    data = load_report_data(store, sweep_id=SWEEP)
    first = data.notes[0]
    completed = sum(c.repeats for c in data.configurations)
    assert first.startswith(f"2 of {completed} completed run(s) ran on a busy machine")
    assert "kept out of speedup verdicts" in first
    threads = _config(data, "cnn 1 process x 4 threads")
    assert threads.busy_runs == 1
    assert any(n.startswith("busy machine: 1 of 3 run(s)") for n in threads.notes)
    assert threads.speedup is not None  # the figures stay shown
    # The baseline ran busy: every other configuration's speedup says so.
    assert any("the baseline ran on a busy machine" in n for n in threads.notes)
    serial = _config(data, "cnn serial 1 core")
    assert not any("the baseline ran" in n for n in serial.notes)


def test_report_without_busy_runs_has_no_busy_note(tmp_path):
    path = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    data = load_report_data(path, sweep_id=SWEEP)
    assert not any("busy" in note for note in data.notes)
    assert not any("busy" in n for c in data.configurations for n in c.notes)


def test_plots_cross_the_busy_points(store):
    data = load_report_data(store, sweep_id=SWEEP)
    drawn = []

    class Axes:
        def plot(self, xs, ys, **style):
            drawn.append((list(xs), list(ys), style))

    lines = [("all", data.configurations)]
    _mark_busy(Axes(), lines, lambda c: c.samples_per_s_median)
    ((xs, ys, style),) = drawn
    busy = [c for c in data.configurations if c.busy_runs]
    assert xs == [c.cores for c in busy]  # plotted against cores, like every line
    assert ys == [c.samples_per_s_median for c in busy]
    assert "busy" in style["label"]


def test_sweep_summary_marks_configurations_with_busy_runs(store):
    rows = sweep_summary(store, SWEEP).rows
    labels = [row[0] for row in rows]
    assert "cnn serial 1 core (busy: 1 of 3)" in labels
    assert "cnn 1 process x 4 threads (busy: 1 of 3)" in labels
    assert "cnn 4 pinned workers x 1 thread" in labels


def test_bench_table_marks_a_busy_row():
    rung = Rung("serial", RunOptions.of(workload="mnist-cnn"), cores=1)
    result = {
        "threads_per_worker": 1,
        "world_size": 1,
        "samples_per_s": 100.0,
        "step_time_s_median": 0.01,
        "step_time_s_iqr": 0.0,
    }
    quiet, busy = table_rows(
        [RungResult(rung, [result | QUIET]), RungResult(rung, [result | BUSY])]
    )
    assert "busy" not in quiet["note"]
    assert "busy machine" in busy["note"]
    assert busy["samples/s"] == "100"  # the figures stay


def _measured(rate: float, contention: dict, world_size: int = 1) -> dict:
    """A stored rung run's summary: `rate` samples/s, quiet or busy."""
    return {
        "threads_per_worker": 1,
        "world_size": world_size,
        "samples_per_s": rate,
        "step_time_s_median": 1 / rate,
        "step_time_s_iqr": 0.0,
    } | contention


def test_bench_rounds_on_a_busy_machine_are_left_out_of_the_speedup():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    serial, other = ladder[0], ladder[1]

    # Round 2 ran busy: its ratio (0.2x) must not pull the speedup; rounds 1 and 3 say 2x.
    rows = table_rows(
        [
            RungResult(
                serial, [_measured(100, QUIET), _measured(100, QUIET), _measured(100, QUIET)]
            ),
            RungResult(other, [_measured(200, QUIET), _measured(20, BUSY), _measured(200, QUIET)]),
        ]
    )
    assert rows[1]["speedup"].startswith("2.00x")
    assert "busy machine in 1 of 3 rounds" in rows[1]["note"]
    assert "1 round(s) with a busy run here or in the serial run left out" in rows[1]["note"]
    assert rows[1]["verdict"] == "faster than serial"  # from the 2 quiet rounds
    # Every round busy: the ratio as measured, no verdict, and the table says why.
    rows = table_rows(
        [
            RungResult(serial, [_measured(100, BUSY), _measured(100, BUSY)]),
            RungResult(other, [_measured(20, BUSY), _measured(40, BUSY)]),
        ]
    )
    assert rows[1]["verdict"] == "not trusted: busy machine"
    assert rows[1]["speedup"] == "0.30x [0.20, 0.40]"
    assert "speedup not trusted" in rows[1]["note"]


def test_a_round_busy_in_the_baseline_only_is_left_out_of_every_pair():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    serial, other = ladder[0], ladder[1]

    rows = table_rows(
        [
            RungResult(serial, [_measured(100, QUIET), _measured(10, BUSY), _measured(100, QUIET)]),
            RungResult(
                other, [_measured(150, QUIET), _measured(150, QUIET), _measured(150, QUIET)]
            ),
        ]
    )
    # The busy serial round (15x) is out: two quiet rounds at 1.5x.
    assert rows[1]["speedup"] == "1.50x [1.50, 1.50]"
    assert rows[1]["verdict"] == "faster than serial"
    assert "busy machine in" not in rows[1]["note"]  # its own runs were quiet
    assert "1 round(s) with a busy run here or in the serial run left out" in rows[1]["note"]


def test_the_accuracy_row_is_against_the_quiet_serial_rounds_and_marked_when_busy():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    serial = ladder[0]
    full = Rung("full recipe", RunOptions.of(workload="mnist-cnn"), cores=2)

    base = RungResult(
        serial,
        [
            _measured(100, QUIET, world_size=2),
            _measured(50, BUSY, world_size=2),
            _measured(100, QUIET, world_size=2),
        ],
    )
    rows = table_rows(
        [base, RungResult(full, [_measured(150, QUIET, world_size=2)], in_rounds=False)]
    )
    # 150 / 100 (the quiet serial rounds), not 150 / 100 over a median the busy round pulls.
    assert rows[1]["speedup"] == "1.50x"
    assert rows[1]["verdict"] == "-"
    assert "speedup against the serial rung's quiet rounds" in rows[1]["note"]
    rows = table_rows(
        [base, RungResult(full, [_measured(150, BUSY, world_size=2)], in_rounds=False)]
    )
    assert rows[1]["speedup"] == "1.50x"  # the figure stays
    assert rows[1]["verdict"] == "not trusted: busy machine"
    assert "speedup not trusted" in rows[1]["note"]
    every = RungResult(
        serial, [_measured(100, BUSY, world_size=2), _measured(120, BUSY, world_size=2)]
    )
    rows = table_rows(
        [every, RungResult(full, [_measured(150, QUIET, world_size=2)], in_rounds=False)]
    )
    assert rows[1]["verdict"] == "not trusted: busy machine"


def test_the_pitfall_line_is_not_trusted_when_every_round_was_busy():
    from trainscale.benchmark.run import BenchResult

    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    pinned = next(r for r in ladder if isinstance(r, Rung) and r.pitfall_of)
    naive = next(r for r in ladder if r.name == pinned.pitfall_of)

    def run(rate):
        return {"threads_per_worker": 1, "world_size": 2, "samples_per_s": rate} | BUSY

    result = BenchResult("b", "mnist-cnn", {}, RunOptions.of(workload="mnist-cnn"), 40, 64, 2)
    result.results = [
        RungResult(pinned, [run(300), run(310)]),
        RungResult(naive, [run(90), run(80)]),
    ]
    (line,) = result.pitfall_lines
    # The ratio as measured, no verdict.
    assert "0.28x [0.26, 0.30] (2 rounds, every one on a busy machine)" in line
    assert line.endswith(": not trusted: busy machine")
    assert "faster" not in line and "slower" not in line


def _rows_by_label(path):
    return {row[0].split(" (busy")[0]: row for row in sweep_summary(path, SWEEP).rows}


def test_sweep_and_report_leave_busy_rounds_out_of_the_paired_verdict(tmp_path):
    path = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    with RunStore(path) as opened:
        assert opened.add_to_summary(run_id(1, 0), BUSY)  # 4 threads, round 0
    row = _rows_by_label(path)["cnn 1 process x 4 threads"]
    assert row[0] == "cnn 1 process x 4 threads (busy: 1 of 3)"
    # Rounds 1 and 2 only: 260/102 and 255/98, not round 0's 250/100.
    assert row[5] == "2.58x [2.55, 2.60] (2 rounds) (1 busy round(s) left out)"
    assert row[6] == "faster than the baseline"
    threads = _config(load_report_data(path, sweep_id=SWEEP), "cnn 1 process x 4 threads")
    assert threads.paired_trusted and threads.paired_rounds == 2
    assert "paired speedup: 1 busy round(s) left out" in threads.notes


def test_sweep_and_report_give_no_verdict_where_every_shared_round_was_busy(tmp_path):
    path = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    with RunStore(path) as opened:
        for repeat in range(3):  # the baseline ran busy in every round
            assert opened.add_to_summary(run_id(0, repeat), BUSY)
    rows = _rows_by_label(path)
    for label in ("cnn 1 process x 4 threads", "cnn 4 pinned workers x 1 thread"):
        speedup, verdict = rows[label][5], rows[label][6]
        assert speedup.startswith(("2.", "3."))  # the ratio as measured stays
        assert verdict == "not trusted: busy machine"
    data = load_report_data(path, sweep_id=SWEEP)
    threads = _config(data, "cnn 1 process x 4 threads")
    assert not threads.paired_trusted
    assert threads.paired_verdict == "not trusted: busy machine"
    assert "paired speedup: every shared round had a busy run, not trusted" in threads.notes
