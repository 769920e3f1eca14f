"""`trainscale.recommend`, `simulate` and `emulate`: the best setting here, the predicted
scaling beyond it and what N workers cost in accuracy, as the CLI's `--json` gives them,
with one DataFrame row per candidate or worker count."""

from __future__ import annotations

import json

import pytest

import trainscale
from trainscale.api.results import PREDICTION_COLUMNS, TIME_TO_ACCURACY_COLUMNS
from trainscale.cli import main
from trainscale.errors import ConfigError
from trainscale.results.store import RunStore

from tests.helpers.mnist_files import write_random_mnist


def test_simulate_predicts_what_the_command_predicts(tmp_path, capsys):
    store = tmp_path / "none.db"  # a preset's peak calibrates: no run is needed
    predicted = trainscale.simulate(
        "mnist-cnn", cluster="v100-nvlink-ib", workers=[4, 1, 2], samples=200, store=store
    )
    args = ["simulate", "mnist-cnn", "--cluster", "v100-nvlink-ib", "--workers", "1,2,4"]
    assert main([*args, "--samples", "200", "--store", str(store), "--json"]) == 0
    assert predicted.to_dict() == json.loads(capsys.readouterr().out)
    assert (predicted.workload, predicted.cluster, predicted.calibration) == (
        "mnist-cnn",
        "v100-nvlink-ib",
        "peak",
    )
    assert predicted.device == "V100 SXM2"
    frame = predicted.to_dataframe()
    assert list(frame.columns) == list(PREDICTION_COLUMNS)
    assert frame["workers"].tolist() == [1, 2, 4]  # sorted, as the command sorts them
    assert predicted.speedups[1] == pytest.approx(1.0)
    assert 1.0 < predicted.speedups[2] < predicted.speedups[4] <= 4.0
    assert not store.exists()  # a prediction stores nothing


def test_simulate_writes_its_plots_where_asked(tmp_path):
    predicted = trainscale.simulate(
        "mnist-cnn",
        cluster="v100-nvlink-ib",
        workers=(1, 2),
        samples=100,
        plot=tmp_path / "plots",
        store=tmp_path / "none.db",
    )
    assert predicted.plots and all(p.suffix == ".png" and p.is_file() for p in predicted.plots)
    assert all(p.parent == tmp_path / "plots" for p in predicted.plots)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"batch_size": 8, "global_batch_size": 16}, "--batch-size or --global-batch-size"),
        ({"workers": [0, 2]}, "--workers takes whole numbers >= 1"),
        ({"cluster": "no-such-cluster"}, "unknown cluster preset 'no-such-cluster'"),
        ({"worker": [2]}, "has no option 'worker' (did you mean 'workers'?)"),
    ],
    ids=["both-batches", "zero-workers", "unknown-cluster", "misspelt"],
)
def test_simulate_mistakes_are_one_config_error_line(tmp_path, options, message):
    with pytest.raises(ConfigError) as caught:
        trainscale.simulate("mnist-cnn", store=tmp_path / "none.db", **options)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_recommend_returns_the_search_and_reads_its_trials_back(tmp_path, monkeypatch):
    """A real search, as small as it gets: the baseline and one more candidate, one rung of
    two steps, on synthetic data (so no accuracy run)."""
    from dataclasses import replace

    from trainscale.advisor import run as advisor_run

    space = advisor_run.machine_space

    def two_candidates(*args, **kwargs):
        full = space(*args, **kwargs)
        other = next(c for c in full.candidates if c != full.baseline)
        return replace(full, candidates=[full.baseline, other])

    monkeypatch.setattr(advisor_run, "machine_space", two_candidates)
    store = tmp_path / "r.db"
    found = trainscale.recommend(
        "mnist-cnn",
        data="synthetic",
        max_workers=1,
        batch_multipliers=[1],
        rung_steps=[2],
        warmup_steps=1,
        include_busy=True,  # a shared test machine: this is about the API, not the busy rule
        store=store,
    )
    data = found.to_dict()
    assert found.recommend_id == data["recommend_id"] and found.workload == "mnist-cnn"
    assert found.best == data["best"]["label"] == found.setting["label"]
    assert found.command == data["command"]
    assert found.command.startswith("trainscale run mnist-cnn ")
    assert found.speedup == data["speedup"] and found.speedup is not None
    assert not found.accuracy_checked and found.best_accuracy is None  # synthetic data
    # Every trial, read back from the store in the order it ran.
    with RunStore(store) as opened:
        stored = opened.list_runs(tag=data["tag"])
    assert [r.run_id for r in found.runs] == [t["run_id"] for t in data["trials"]]
    assert sorted(r.run_id for r in found.runs) == sorted(r.run_id for r in stored)
    assert {r.data for r in found.runs} == {"synthetic"}
    frame = found.to_dataframe()
    assert list(frame.columns) == ["label", "rung", "samples_per_s"]
    assert frame["label"].tolist()[0] == found.best
    assert frame["samples_per_s"].is_monotonic_decreasing
    # (A candidate measured only on a busy machine is measured, and left out of the ranking;
    # the baseline ranks among them, a candidate or not.)
    assert len(frame) == len(found.ranking) <= data["candidates_measured"] + 1


def test_recommend_takes_a_workload_or_a_script(tmp_path):
    with pytest.raises(ConfigError, match=r"^recommend\(\) needs a workload"):
        trainscale.recommend(store=tmp_path / "r.db")
    with pytest.raises(ConfigError, match=r"^recommend\(\) takes a workload or script"):
        trainscale.recommend("mnist-cnn", script="train.py", store=tmp_path / "r.db")
    assert not (tmp_path / "r.db").exists()


def test_emulate_stores_a_run_per_worker_count_then_its_time_to_accuracy_is_predicted(
    tmp_path, capsys
):
    data = write_random_mnist(tmp_path / "mnist", 256, 64)
    store = tmp_path / "e.db"
    emulated = trainscale.emulate(
        "mnist-cnn",
        workers=[1, 2],
        mode="sync",
        epochs=0.5,
        target_accuracy=0.01,  # random digits: a target that the first evaluation reaches
        data_dir=data,
        store=store,
    )
    document = emulated.to_dict()
    assert emulated.emulation_id == document["emulation_id"] and emulated.mode == "sync"
    assert [p["workers"] for p in emulated.points] == [1, 2]
    assert [p["global_batch_size"] for p in emulated.points] == [64, 128]
    assert set(emulated.accuracy) == {1, 2}
    assert all(0.0 <= a <= 1.0 for a in emulated.accuracy.values())
    assert [r.run_id for r in emulated.runs] == [p["run_id"] for p in emulated.points]
    assert {r.tag for r in emulated.runs} == {document["tag"]}
    assert emulated.report_command == document["report"]
    frame = emulated.to_dataframe()
    assert frame["workers"].tolist() == [1, 2] and "steps_curve" not in frame.columns
    assert frame["test_accuracy"].tolist() == [emulated.accuracy[1], emulated.accuracy[2]]
    # Its time to accuracy on a cluster: the emulated steps x the predicted step.
    predicted = trainscale.predict_time_to_accuracy(
        "mnist-cnn", emulation=emulated, cluster="v100-nvlink-ib", samples=200, store=store
    )
    args = ["predict-time-to-accuracy", "mnist-cnn", "--cluster", "v100-nvlink-ib"]
    args += ["--emulation", emulated.emulation_id, "--samples", "200", "--store", str(store)]
    assert main([*args, "--json"]) == 0
    assert predicted.to_dict() == json.loads(capsys.readouterr().out)
    rows = predicted.to_dataframe()
    assert list(rows.columns) == list(TIME_TO_ACCURACY_COLUMNS)
    assert rows["run_id"].tolist() == [p["run_id"] for p in emulated.points]
    first = predicted.points[0]
    assert first["steps_to_target"] >= 1
    assert first["time_to_target_s"] == pytest.approx(
        first["steps_to_target"] * first["step_time_s"]
    )
    assert predicted.best_by_mode["sync"]["fastest_workers"] in (1, 2)


def test_emulate_needs_its_worker_counts_and_mode_and_takes_only_its_options(tmp_path):
    with pytest.raises(ConfigError, match=r"^emulate\(\) needs the worker counts and the mode"):
        trainscale.emulate("mnist-cnn", workers=[1, 2])
    with pytest.raises(ConfigError, match=r"has no option 'threads_per_worker'"):
        trainscale.emulate("mnist-cnn", workers=[1], mode="sync", threads_per_worker=1)
    assert not list(tmp_path.glob("*.db"))


@pytest.mark.parametrize(
    "function", ["recommend", "simulate", "emulate", "predict_time_to_accuracy"]
)
def test_a_call_without_a_workload_is_one_config_error_line(function, tmp_path):
    with pytest.raises(ConfigError, match=rf"^{function}\(\) needs a workload \(a name, "):
        getattr(trainscale, function)(store=tmp_path / "s.db")
