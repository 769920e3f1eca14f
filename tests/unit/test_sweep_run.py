"""`sweep.run`: a sweep as library calls (load, then run), with a stand-in for the runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.results.store import RunStore
from trainscale.sweeps.run import SweepRunListener, load_sweep, run_sweep
from trainscale.sweeps.summary import sweep_summary

from tests.helpers.stored_runs import add_run
from tests.helpers.sweeps import FakeRunner

SPEC = """
name = "two"
[base]
workload = "mnist-cnn"
data = "real"
steps = 3
threads_per_worker = 1
[grid]
batch_size = [8, 16]
"""


class Heard(SweepRunListener):
    def __init__(self) -> None:
        self.events: list[str] = []

    def planned(self, spec, plan, store) -> None:
        self.events.append(f"planned {len(plan.runs)}")

    def start(self, sweep_id, todo, done) -> None:
        self.events.append(f"start {todo}")

    def swept(self, result) -> None:
        self.events.append(f"swept {len(result.outcome.completed)}")


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "two.toml"
    path.write_text(SPEC)
    return path


def test_load_applies_the_data_overrides_and_names_the_source(spec_file: Path):
    spec, source = load_sweep(spec_file, data="synthetic", data_dir="/nowhere")
    assert source == str(spec_file)
    assert (spec.base["data"], spec.base["data_dir"]) == ("synthetic", "/nowhere")
    assert load_sweep(spec_file)[0].base["data"] == "real"
    with pytest.raises(ConfigError, match="--quick scales down a recipe"):
        load_sweep(spec_file, quick=True)
    with pytest.raises(ConfigError, match="give a sweep file or --recipe NAME"):
        load_sweep()


def test_a_dry_run_plans_and_stores_nothing(spec_file: Path, tmp_path: Path):
    spec, source = load_sweep(spec_file, data="synthetic")
    heard = Heard()
    result = run_sweep(spec, source, store=tmp_path / "s.db", dry_run=True, listener=heard)
    assert result.outcome is None and result.summary is None
    assert [p.label for p in result.plan.runs] == ["batch_size=8", "batch_size=16"]
    assert heard.events == ["planned 2"]
    with RunStore(tmp_path / "s.db") as store:
        assert store.list_sweeps() == []


def test_run_sweep_runs_summarises_and_reports_nothing_completed(spec_file, tmp_path, monkeypatch):
    fake = FakeRunner(fail_items={1})
    monkeypatch.setattr("trainscale.runner.launch.execute_run", fake)
    spec, source = load_sweep(spec_file, data="synthetic")
    heard = Heard()
    result = run_sweep(spec, source, store=tmp_path / "s.db", listener=heard)
    assert heard.events == ["planned 2", "start 2", "swept 1"]
    assert result.outcome is not None and len(result.outcome.failed) == 1
    assert result.summary is not None
    assert result.summary.title.endswith(": two")
    assert [row[:3] for row in result.summary.rows] == [
        ["batch_size=8", "1", "100.0"],
        ["batch_size=16", "0", "-"],
    ]
    assert not result.nothing_completed and result.report is None

    monkeypatch.setattr("trainscale.runner.launch.execute_run", FakeRunner(fail_items={0, 1}))
    assert run_sweep(spec, source, store=tmp_path / "other.db").nothing_completed


def test_synthetic_data_for_a_recipe_that_stops_at_its_targets_trains_whole_lengths() -> None:
    spec, _ = load_sweep(recipe="platforms", quick=True, data="synthetic")
    for _, overrides in spec.configurations():
        options = RunOptions.from_flat({**spec.base, **overrides})  # not refused
        assert options.data.kind == "synthetic" and not options.measurement.stop_at_target


def test_configurations_of_the_same_settings_are_planned_once(tmp_path: Path, monkeypatch):
    """A point that gives an option its default value is the base configuration again: its
    runs would be matched to both, each counting the other's as its own."""
    path = tmp_path / "same.toml"
    path.write_text(
        SPEC.replace("[grid]\nbatch_size = [8, 16]\n", "")
        + '[[points]]\nlabel = "base"\n[[points]]\nlabel = "again"\nwarmup_steps = 5\n'
        + "[[points]]\nlabel = 'other'\nwarmup_steps = 1\n"
    )
    spec, source = load_sweep(path, data="synthetic")
    monkeypatch.setattr("trainscale.runner.launch.execute_run", FakeRunner())
    result = run_sweep(spec, source, store=tmp_path / "s.db")
    assert [p.label for p in result.plan.runs] == ["base", "other"]
    assert result.plan.notes() == [
        "configuration 'again' resolves to the same settings as 'base' on this machine: "
        "planned once, as 'base'"
    ]
    assert result.outcome is not None and len(result.outcome.completed) == 2
    assert result.summary is not None
    assert [row[:2] for row in result.summary.rows] == [["base", "1"], ["other", "1"]]


def test_a_repeat_made_twice_counts_once_in_the_summary(tmp_path: Path, monkeypatch):
    """A deleted run imported again beside the one a resume made: one repeat, as `runs
    sweeps` and a resume count it, and the newest is the one counted."""
    path = tmp_path / "one.toml"
    path.write_text(SPEC.replace("batch_size = [8, 16]", "batch_size = [8]"))
    spec, source = load_sweep(path, data="synthetic")
    monkeypatch.setattr("trainscale.runner.launch.execute_run", FakeRunner())
    result = run_sweep(spec, source, store=tmp_path / "s.db")
    assert result.outcome is not None
    (planned,) = result.plan.runs
    with RunStore(tmp_path / "s.db") as store:
        add_run(
            store,
            "again0001",
            sweep_id=result.outcome.sweep_id,
            sweep_item=0,
            repeat_index=0,
            config_hash=planned.config_hash,
        )
        store.complete_run("again0001", {"samples_per_s": 300.0}, [], [0.1, 0.1])
    (row,) = sweep_summary(tmp_path / "s.db", result.outcome.sweep_id).rows
    assert row[1:3] == ["1", "300.0"]
