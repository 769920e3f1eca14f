"""A script run given no `--target-accuracy` has no target to reach: its stored summary holds
the stand-in target 1.0 (train/script_summary.py), and every reader says "no target" rather
than "not reached" or "missed" (the run's own lines, `runs list`, a report's tables, notes
and plot)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.cli.run_cmd import format_result
from trainscale.reporting import plots, tables
from trainscale.reporting.aggregate import aggregate
from trainscale.reporting.listing import time_to_target_cell
from trainscale.results.store import RunStore
from trainscale.train.meter import ScriptMeasurements
from trainscale.train.script_summary import summarize_script

from tests.helpers.stored_runs import add_run


def _summary(target: float | None) -> dict:
    """A script run's stored summary: one rank, evaluated at 0.5 and then 0.9."""
    rank = ScriptMeasurements(
        step_times_s=[0.1] * 6,
        data_wait_s=[0.0] * 6,
        samples=[32] * 6,
        curve=[(0.3, 3, 0.5), (0.6, 6, 0.9)],
    )
    out = summarize_script([rank], [{"peak_rss_bytes": 1}], 1, target)
    return {**out.metrics.to_dict(), **out.extra}


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    opened = RunStore(tmp_path / "runs.db")
    for run_id, target in (("notarget", None), ("reached", 0.8), ("missed", 0.95)):
        add_run(
            opened,
            run_id,
            config={"workload": "script:train.py", "target_accuracy": target},
            workload="script:train.py",
            data_kind="real",
            precision="script",
        )
        opened.complete_run(run_id, _summary(target), [], [0.1] * 6)
    return opened


def test_the_runs_own_lines_say_no_target_was_given() -> None:
    result = {
        "run_id": "notarget",
        "workload": "script:train.py",
        "status": "completed",
        "data": "real",
        "world_size": 1,
        "threads_per_worker": 1,
        "affinity": "compact",
        "precision": "script",
        "global_batch_size": 32,
        **_summary(None),
    }
    assert "no time to target: no --target-accuracy given" in format_result(result)
    assert "not reached" not in format_result(result)
    missed = format_result({**result, **_summary(0.95)})
    assert "time to target: not reached (training clock)" in missed


def test_runs_list_says_missed_only_where_a_target_was_given(store: RunStore) -> None:
    cells = {r.run_id: time_to_target_cell(r) for r in store.list_runs()}
    assert cells == {"notarget": "-", "reached": "0.6", "missed": "missed"}


def test_a_report_says_no_target_and_counts_no_misses(store: RunStore) -> None:
    report = aggregate(store.list_runs(), title="t", source="s")
    configs = {c.run_ids[0]: c for c in report.workloads[0].configurations}
    assert configs["notarget"].target_accuracy is None
    assert tables.time_to_target(configs["notarget"]) == "no target"
    assert tables.time_to_target(configs["missed"]) == "not reached"
    assert not any("target reached" in note for note in configs["notarget"].notes)
    assert "target reached in 0 of 1 runs" in configs["missed"].notes


def test_the_time_to_accuracy_plot_says_why_it_is_not_drawn(store: RunStore) -> None:
    runs = [r for r in store.list_runs() if r.run_id == "notarget"]
    section = aggregate(runs, title="t", source="s").workloads[0]
    assert plots._time_to_accuracy(section) == (
        "no target accuracy was given (`trainscale run --target-accuracy`)"
    )
