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


def test_bench_rounds_on_a_busy_machine_are_left_out_of_the_speedup():
    ladder = plan_ladder(RunOptions.of(workload="mnist-cnn"), 2, bf16_native=False, num_gpus=0)
    serial, other = ladder[0], ladder[1]

    def run(rate, contention):
        return {
            "threads_per_worker": 1,
            "world_size": 1,
            "samples_per_s": rate,
            "step_time_s_median": 1 / rate,
            "step_time_s_iqr": 0.0,
        } | contention

    # Round 2 ran busy: its ratio (0.2x) must not pull the speedup; rounds 1 and 3 say 2x.
    rows = table_rows(
        [
            RungResult(serial, [run(100, QUIET), run(100, QUIET), run(100, QUIET)]),
            RungResult(other, [run(200, QUIET), run(20, BUSY), run(200, QUIET)]),
        ]
    )
    assert rows[1]["speedup"].startswith("2.00x")
    assert "busy machine in 1 of 3 rounds" in rows[1]["note"]
    # Every round busy: no verdict at all, and the table says why.
    rows = table_rows(
        [
            RungResult(serial, [run(100, BUSY), run(100, BUSY)]),
            RungResult(other, [run(20, BUSY), run(25, BUSY)]),
        ]
    )
    assert rows[1]["verdict"] == "cannot tell: busy machine"
    assert rows[1]["speedup"] == "-"


def test_the_pitfall_line_cannot_tell_when_every_round_was_busy():
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
    assert line.endswith("cannot tell: no round measured both on a quiet machine")
