"""Sweep execution: one run at a time, failures recorded, resume without loss or duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.errors import TrainscaleError
from trainscale.results.store import RunStore
from trainscale.sweeps.document import sweep_document
from trainscale.sweeps.execute import INTERRUPTED, SweepListener, execute_sweep
from trainscale.sweeps.plan import make_plan
from trainscale.sweeps.run import SweepResult, SweepRunListener, run_sweep
from trainscale.sweeps.spec import parse_spec

from tests.helpers.sweeps import FakeRunner

BASE = {"workload": "mnist-cnn", "data": "synthetic", "steps": 3, "threads_per_worker": 1}


def spec_of(**raw):
    return parse_spec({"base": dict(BASE), **raw}, default_name="t")


def test_every_planned_run_runs_once_in_order_and_is_linked(tmp_path: Path):
    spec = spec_of(grid={"batch_size": [8, 16]}, repeats=2)
    plan = make_plan(spec)
    fake = FakeRunner()
    outcome = execute_sweep(spec, plan, tmp_path / "s.db", "x.toml", run_one=fake)
    assert fake.calls == [0, 1, 2, 3]
    with RunStore(tmp_path / "s.db") as store:
        runs = store.sweep_runs(outcome.sweep_id)
        sweep = store.get_sweep(outcome.sweep_id[:8])
    assert [(r.sweep_item, r.repeat_index) for r in runs] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert [r.config_hash for r in runs] == [p.config_hash for p in plan.runs]
    assert {r.tag for r in runs} == {f"sweep:{outcome.sweep_id[:8]}"}
    assert [p["label"] for p in sweep.plan] == [p.label for p in plan.runs]


def test_a_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path: Path):
    spec = spec_of(grid={"batch_size": [8, 16, 32]})
    outcome = execute_sweep(
        spec, make_plan(spec), tmp_path / "s.db", "x", run_one=FakeRunner(fail_items={1})
    )
    assert len(outcome.completed) == 2
    assert [reason for _, reason in outcome.failed] == ["worker rank 1 failed: injected"]
    with RunStore(tmp_path / "s.db") as store:
        statuses = [r.status for r in store.sweep_runs(outcome.sweep_id)]
    assert statuses == ["completed", "failed", "completed"]


def test_resume_after_a_kill_skips_completed_and_redoes_the_interrupted(tmp_path: Path):
    store_path = tmp_path / "s.db"
    spec = spec_of(grid={"batch_size": [8, 16]}, repeats=2)
    with pytest.raises(KeyboardInterrupt):
        execute_sweep(spec, make_plan(spec), store_path, "x", run_one=FakeRunner(stop_after=2))

    fake = FakeRunner()
    outcome = execute_sweep(spec, make_plan(spec), store_path, "x", resume=True, run_one=fake)
    assert outcome.resumed and outcome.skipped_done == 2
    assert fake.calls == [2, 3]
    with RunStore(store_path) as store:
        runs = store.sweep_runs(outcome.sweep_id)
        assert len(store.list_sweeps()) == 1
    completed = [(r.sweep_item, r.repeat_index) for r in runs if r.status == "completed"]
    assert sorted(completed) == [(0, 0), (1, 0), (2, 1), (3, 1)]  # each exactly once
    (interrupted,) = [r for r in runs if r.status == "failed"]
    assert interrupted.run_id == "killed-2" and interrupted.error == INTERRUPTED
    assert not [r for r in runs if r.status == "running"]

    # A second resume has nothing left to do.
    again = FakeRunner()
    execute_sweep(spec, make_plan(spec), store_path, "x", resume=True, run_one=again)
    assert again.calls == []


class Heard(SweepListener):
    def __init__(self) -> None:
        self.said: list[str] = []

    def not_resumed(self, why: str) -> None:
        self.said.append(why)


def test_resume_without_an_earlier_sweep_starts_a_new_one_and_says_so(tmp_path: Path):
    spec = spec_of(grid={"batch_size": [8]})
    heard = Heard()
    outcome = execute_sweep(
        spec, make_plan(spec), tmp_path / "s.db", "x", True, heard, run_one=FakeRunner()
    )
    assert not outcome.resumed and len(outcome.completed) == 1
    short = outcome.sweep_id[:8]
    assert heard.said == [
        f"--resume: no earlier sweep of this spec in {tmp_path / 's.db'}; started sweep {short}"
    ]


@pytest.mark.parametrize(
    ("again_from", "said"),
    [
        ("s.toml", "(t) was made from another version of this spec (changed since?)"),
        # Another file that carries the same name: neither was edited.
        ("b.toml", "has the same name but was made from s.toml, another sweep file"),
    ],
)
def test_resume_of_a_changed_spec_names_the_sweep_whose_runs_are_not_reused(
    tmp_path: Path, again_from: str, said: str
):
    """The file edited after a stop (another repeat), or another file of the same name: a
    new sweep, and the line says why."""
    spec = spec_of(grid={"batch_size": [8]})
    first = execute_sweep(spec, make_plan(spec), tmp_path / "s.db", "s.toml", run_one=FakeRunner())
    edited = spec_of(grid={"batch_size": [8]}, repeats=2)
    heard = Heard()
    again = execute_sweep(
        edited, make_plan(edited), tmp_path / "s.db", again_from, True, heard, run_one=FakeRunner()
    )
    assert not again.resumed and len(again.completed) == 2
    assert heard.said == [
        f"--resume: sweep {first.sweep_id[:8]} {said}, so its runs are not reused; started "
        f"sweep {again.sweep_id[:8]}"
    ]


def test_without_resume_the_same_spec_makes_a_new_sweep(tmp_path: Path):
    spec = spec_of(grid={"batch_size": [8]})
    first = execute_sweep(spec, make_plan(spec), tmp_path / "s.db", "x", run_one=FakeRunner())
    second = execute_sweep(spec, make_plan(spec), tmp_path / "s.db", "x", run_one=FakeRunner())
    assert first.sweep_id != second.sweep_id


def test_resume_refuses_a_plan_that_resolves_differently(tmp_path: Path):
    spec = spec_of(grid={"batch_size": [8]})
    execute_sweep(spec, make_plan(spec), tmp_path / "s.db", "x", run_one=FakeRunner())
    plan = make_plan(spec)
    changed = plan.runs[0].config.with_(threads_per_worker=7)
    object.__setattr__(plan.runs[0], "config", changed)  # as if resolved on another machine
    with pytest.raises(TrainscaleError, match="resolve differently"):
        execute_sweep(spec, plan, tmp_path / "s.db", "x", resume=True, run_one=FakeRunner())


def test_the_run_in_progress_reports_its_steps_to_the_listener(tmp_path: Path):
    from trainscale.sweeps.execute import SweepListener
    from trainscale.train.progress import FileProgress

    class StepsRunner(FakeRunner):
        """Writes its steps as a run's main worker does, slowly enough to be watched."""

        def __call__(self, options, store_path, quiet, slot, config):
            import time

            progress = FileProgress(slot.progress_file)
            progress.start(20, "run")
            for step in (10, 20):
                time.sleep(0.6)
                progress.update(step)
            return super().__call__(options, store_path, quiet, slot, config)

    class Heard(SweepListener):
        def __init__(self) -> None:
            self.steps: list[tuple[int, int, int]] = []

        def run_step(self, planned, step, total):
            self.steps.append((planned.item, step, total))

    spec = spec_of(grid={"batch_size": [8, 16]})
    heard = Heard()
    execute_sweep(
        spec, make_plan(spec), tmp_path / "s.db", "x", listener=heard, run_one=StepsRunner()
    )
    for item in (0, 1):
        seen = [(step, total) for i, step, total in heard.steps if i == item]
        assert seen[-1] == (20, 20) and (10, 20) in seen


def test_a_sweep_over_several_nodes_is_refused_when_planned_before_anything_is_stored():
    nodes = {"nnodes": 2, "rdzv_endpoint": "127.0.0.1:29500", "rdzv_id": "job"}
    spec = parse_spec({"base": {**BASE, **nodes}}, default_name="t")
    with pytest.raises(TrainscaleError, match="a sweep runs on one node"):
        make_plan(spec)  # what --dry-run and the sweep itself plan first


def test_a_dry_run_of_a_resume_says_what_it_would_continue_and_changes_nothing(tmp_path: Path):
    spec = spec_of(grid={"batch_size": [8, 16]})
    store = tmp_path / "s.db"
    first = execute_sweep(spec, make_plan(spec), store, "s.toml", run_one=FakeRunner({1}))
    heard = []

    class Listener(SweepRunListener):
        def would_resume(self, result: SweepResult) -> None:
            heard.append(result.resume_preview)

    result = run_sweep(spec, "s.toml", store=store, resume=True, dry_run=True, listener=Listener())
    assert heard == [result.resume_preview] and result.outcome is None
    assert result.would_resume_line().startswith(
        f"--resume would continue sweep {first.sweep_id[:8]}: 1 of 2 run(s) completed there, "
        "1 to run"
    )
    assert result.resume_preview is not None
    assert result.resume_preview.sweep_id == first.sweep_id
    assert [result.done_before(p) for p in result.plan.runs] == [True, False]
    document = sweep_document(result)
    assert (document["sweep_id"], document["resumed"], document["skipped_done"]) == (
        first.sweep_id,
        True,
        1,
    )
    with RunStore(store) as opened:
        assert len(opened.list_runs()) == 2  # nothing run, nothing marked
    fresh = run_sweep(spec, "s.toml", store=tmp_path / "new.db", resume=True, dry_run=True)
    assert fresh.resume_preview is None and sweep_document(fresh)["resumed"] is False


def test_the_json_document_names_the_configurations_skip_invalid_left_out(tmp_path: Path):
    spec = spec_of(grid={"workers": [1, 4096]}, skip_invalid=True)
    result = run_sweep(spec, "s.toml", store=tmp_path / "s.db", dry_run=True)
    skipped = sweep_document(result)["skipped"]
    assert [entry["label"] for entry in skipped] == ["workers=4096"]
    assert "oversubscribes this machine" in skipped[0]["reason"]
