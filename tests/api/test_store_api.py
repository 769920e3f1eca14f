"""`trainscale.import_runs` and `trainscale.delete_runs`: `runs import` and `runs delete`
from Python, through the same store code, returning what they copied and deleted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import trainscale
from trainscale.errors import ConfigError, StoreError
from trainscale.results.store import RunStore

from tests.helpers.stored_runs import add_run


def _store(path: Path, *run_ids: str, tag: str | None = None) -> Path:
    """A store of completed runs on host 'laptop'."""
    with RunStore(path) as store:
        for run_id in run_ids:
            add_run(store, run_id, env={"hostname": "laptop"}, tag=tag)
            store.complete_run(run_id, {"samples_per_s": 100.0}, [], [0.1, 0.2])
    return path


def test_import_runs_copies_another_store_s_runs_once(tmp_path):
    source = _store(tmp_path / "laptop.db", "1a000000001", "1a000000002")
    here = _store(tmp_path / "here.db", "4e000000001")
    imported = trainscale.import_runs(source, store=here)
    assert (imported.runs, imported.already_there, imported.still_running) == (2, 0, 0)
    assert imported.to_dict()["source"] == str(source)
    again = trainscale.import_runs(str(source), store=here)
    assert (again.runs, again.already_there) == (0, 2)
    assert {run.run_id for run in trainscale.runs(store=here)} == {
        "1a000000001",
        "1a000000002",
        "4e000000001",
    }


def test_import_runs_of_a_missing_store_is_one_line_and_makes_nothing(tmp_path):
    with pytest.raises(StoreError) as caught:
        trainscale.import_runs(tmp_path / "nope.db", store=tmp_path / "here.db")
    assert "\n" not in str(caught.value) and "nope.db" in str(caught.value)
    assert not (tmp_path / "here.db").exists()  # no store made for a mistyped source


def test_delete_runs_deletes_the_named_runs_and_returns_them_as_stored(tmp_path):
    store = _store(tmp_path / "s.db", "de1a00000001", "de1b00000002", "de1c00000003")
    named = {run.run_id: run for run in trainscale.runs(store=store)}
    # A StoredRun, and an id's unique prefix.
    deleted = trainscale.delete_runs([named["de1a00000001"], "de1b"], store=store)
    assert sorted(run.run_id for run in deleted) == ["de1a00000001", "de1b00000002"]
    assert all(run.status == "completed" for run in deleted)
    assert [run.run_id for run in trainscale.runs(store=store)] == ["de1c00000003"]
    with RunStore(store) as opened:  # their step times went with them
        assert opened.step_times("de1a00000001") == []
    # One id alone is that run, not the letters of its id.
    assert [run.run_id for run in trainscale.delete_runs("de1c", store=store)] == ["de1c00000003"]


def test_delete_runs_by_filter_and_a_dry_run_that_deletes_nothing(tmp_path):
    store = _store(tmp_path / "s.db", "7a9900000001", "7a9900000002", tag="old")
    _store(store, "0the40000001")
    listed = trainscale.delete_runs(tag="old", dry_run=True, store=store)
    assert len(listed) == 2 and len(trainscale.runs(store=store)) == 3
    assert {run.run_id for run in trainscale.delete_runs(tag="old", store=store)} == {
        "7a9900000001",
        "7a9900000002",
    }
    assert [run.run_id for run in trainscale.runs(store=store)] == ["0the40000001"]


@pytest.mark.parametrize(
    ("keywords", "says"),
    [
        ({}, "give runs, or workload, status, tag or limit"),
        ({"runs": []}, "runs is empty"),
        ({"runs": ["0the40000001"], "tag": "old"}, "not both"),
        ({"status": "gone"}, "status must be one of"),
        ({"limit": 0}, "limit must be a whole number >= 1"),
        ({"runs": "0the40000001", "status": "completed"}, "not both"),
        ({"runs": 5}, "runs: "),
        ({"dry_run": "yes"}, "dry_run: "),
        ({"yes": True}, "yes"),  # the CLI's confirmation: calling is the confirmation
    ],
)
def test_delete_runs_refuses_a_mistake_in_one_line_and_deletes_nothing(tmp_path, keywords, says):
    store = _store(tmp_path / "s.db", "0the40000001")
    with pytest.raises(ConfigError) as caught:
        trainscale.delete_runs(store=store, **keywords)
    assert "\n" not in str(caught.value) and says in str(caught.value)
    assert len(trainscale.runs(store=store)) == 1


def test_delete_runs_refuses_a_running_run_and_deletes_none(tmp_path):
    store = _store(tmp_path / "s.db", "d0ne00000001")
    with RunStore(store) as opened:
        add_run(opened, "ru44ing00001")
    with pytest.raises(StoreError, match="still running"):
        trainscale.delete_runs(["d0ne00000001", "ru44ing00001"], store=store)
    assert len(trainscale.runs(store=store)) == 2


def test_one_run_given_alone_is_that_run_and_a_side_of_another_type_is_refused(tmp_path):
    store = _store(tmp_path / "s.db", "0e1a00000001", "0e1b00000002")
    first = trainscale.runs(store=store)[-1]
    # One id, or one StoredRun, is that run: not the letters of its id.
    for one in (first.run_id, first):
        written = trainscale.report(runs=one, out=tmp_path / "r", store=store)
        assert written.csv.read_text().count("\n") == 2  # the header and the one run
    # An int would be read as an id's prefix, a StoredRuns as its text.
    for side in (5, trainscale.runs(store=store), None):
        with pytest.raises(ConfigError) as caught:
            trainscale.compare(side, first, store=store)
        assert str(caught.value).startswith(
            "trainscale.compare() argument a: must be a run or sweep id (a str), a StoredRun"
        )


def test_stored_runs_are_a_sequence_whose_slices_keep_their_type_and_runs_hash(tmp_path):
    store = _store(tmp_path / "s.db", *(f"5e9{i}00000000" for i in range(7)))
    runs = trainscale.runs(store=store)
    assert isinstance(runs, Sequence) and len(runs) == 7
    first_two = runs[:2]
    assert isinstance(first_two, type(runs)) and len(first_two.to_dataframe()) == 2
    assert len({runs[0], runs[0], runs[1]}) == 2  # a run can key a dict or join a set
    # A line a run in its repr, the first five named: not seven screenfuls.
    shown = repr(runs)
    assert shown.startswith("StoredRuns(7 runs: ") and shown.endswith(", ... 2 more)")
    assert len(shown) < 300


def test_a_comparisons_repr_shows_its_headline(tmp_path):
    store = _store(tmp_path / "s.db", "c0a000000001", "c0b000000002")
    shown = repr(trainscale.compare("c0a0", "c0b0", store=store))
    assert shown.startswith("Comparison(a='run c0a00000', b='run c0b00000', throughput_ratio=")
    assert "significant=" in shown


def test_runs_select_by_workload_as_runs_list_does_never_running_a_script(tmp_path):
    store = tmp_path / "s.db"
    with RunStore(store) as opened:
        for run_id, workload in (("c1", "spiral-mlp"), ("s1", "script:train.py")):
            add_run(opened, run_id, workload=workload)
            opened.complete_run(run_id, {"samples_per_s": 100.0}, [], [0.1, 0.2])
    marker = tmp_path / "imported"
    script = tmp_path / "train.py"
    # A training script without a __main__ guard: importing it would train.
    script.write_text(
        f"import trainscale\nopen({str(marker)!r}, 'w').close()\ntrainscale.meter()\n"
    )
    # A custom workload this process never loaded: selected by the name it is stored under.
    assert [r.run_id for r in trainscale.runs(workload="spiral-mlp", store=store)] == ["c1"]
    assert [r.run_id for r in trainscale.runs(workload="script:train.py", store=store)] == ["s1"]
    assert [r.run_id for r in trainscale.runs(workload=str(script), store=store)] == ["s1"]
    assert not marker.exists()  # the script was not imported
