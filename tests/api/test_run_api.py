"""`trainscale.run` and `trainscale.runs`: the same run as the CLI's, read back from the
store, and the CLI's errors as exceptions."""

from __future__ import annotations

import sys

import pytest

import trainscale
from trainscale.errors import ConfigError, TrainscaleError
from trainscale.hardware.precision_choice import choose_precision
from trainscale.results.export import CSV_COLUMNS, run_to_csv_row
from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli

# Cheap: synthetic data, 4 steps of 16 samples, any core (as tests/cli/test_run_cli.py).
CHEAP = {
    "data": "synthetic",
    "steps": 4,
    "global_batch_size": 16,
    "threads_per_worker": 1,
    "affinity": "none",
    "allow_oversubscribe": True,
    "tag": "api",
}
CHEAP_FLAGS = [
    "--data",
    "synthetic",
    "--steps",
    "4",
    "--global-batch-size",
    "16",
    "--threads-per-worker",
    "1",
    "--affinity",
    "none",
    "--allow-oversubscribe",
    "--tag",
    "api",
    "--quiet",
]


def _record(store, run_id):
    with RunStore(store) as opened:
        return opened.get_run(run_id)


def _only_run(store):
    with RunStore(store) as opened:
        (record,) = opened.list_runs()
    return record


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_is_stored_as_the_cli_stores_it(workers, tmp_path):
    api_store, cli_store = tmp_path / "api.db", tmp_path / "cli.db"
    result = trainscale.run("mnist-cnn", workers=workers, store=api_store, **CHEAP)
    assert result is not None and result.status == "completed"
    record = _record(api_store, result.run_id)
    # The result's headline fields are the stored run's.
    assert result.workload == record.workload == "mnist-cnn"
    assert result.world_size == record.world_size == workers
    assert result.global_batch_size == record.global_batch_size == 16
    assert result.data == record.data_kind == "synthetic"
    assert result.tag == record.tag == "api"
    assert result.samples_per_s == record.summary["samples_per_s"] > 0
    assert result.step_time_s_median == record.summary["step_time_s_median"] > 0
    assert result.num_steps == record.summary["num_steps"] == 4
    assert result.test_accuracy is None and result.time_to_target_s is None  # synthetic
    assert result.config == record.config
    # The CLI with the same flags resolves and stores the same configuration.
    flags = ["--workers", str(workers), *CHEAP_FLAGS, "--store", str(cli_store)]
    assert run_cli(["run", "mnist-cnn", *flags]) == 0
    cli_record = _only_run(cli_store)
    assert cli_record.config == record.config
    assert cli_record.config_hash == record.config_hash == result.config_hash


def test_to_dict_and_to_dataframe_are_the_exports_of_the_stored_run(tmp_path):
    store = tmp_path / "api.db"
    result = trainscale.run("mnist-cnn", store=store, **CHEAP)
    record = _record(store, result.run_id)
    assert result.to_dict()["run_id"] == result.run_id
    assert result.to_dict()["samples_per_s"] == result.samples_per_s
    frame = result.to_dataframe()
    assert list(frame.columns) == list(CSV_COLUMNS)
    assert len(frame) == 1
    expected = run_to_csv_row(record)
    for column in ("run_id", "workload", "status", "world_size", "samples_per_s", "tag"):
        assert frame.iloc[0][column] == expected[column]
    # trainscale.runs() lists it, with the same row.
    listed = trainscale.runs(store=store)
    assert [run.run_id for run in listed] == [result.run_id]
    assert listed.to_dataframe()["samples_per_s"].tolist() == [result.samples_per_s]
    assert trainscale.runs(store=store, status="failed").to_dict() == []


def test_to_dataframe_without_pandas_says_how_to_install_it(tmp_path, monkeypatch):
    from trainscale.api.results import StoredRuns

    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now fails
    with pytest.raises(ConfigError, match=r"pip install pandas") as caught:
        StoredRuns(()).to_dataframe()
    assert "trainscale[pandas]" in str(caught.value)


@pytest.mark.parametrize(
    ("call", "name", "near"),
    [
        (lambda: trainscale.run("mnist-cnn", wokers=2), "wokers", "workers"),
        (lambda: trainscale.run("mnist-cnn", global_batch=64), "global_batch", None),
        (lambda: trainscale.bench("mnist-cnn", stpes=3), "stpes", "steps"),
        (lambda: trainscale.sweep("cpu-parallel", qiuck=True), "qiuck", "quick"),
        (lambda: trainscale.compare("a", "b", confidense=0.9), "confidense", "confidence"),
        (lambda: trainscale.runs(limt=3), "limt", "limit"),
        # A flag spelled as a keyword: the keyword the option really is.
        (lambda: trainscale.run("mnist-cnn", no_eval=True), "no_eval", "evaluate=False"),
        (
            lambda: trainscale.run("mnist-cnn", warmup_steps=2),
            "warmup_steps",
            "warmup_steps_untimed",
        ),
        (lambda: trainscale.report(out="r", sweeps="x"), "sweeps", "sweep"),
    ],
)
def test_an_unknown_keyword_is_a_config_error_naming_it(call, name, near, monkeypatch):
    started = []
    monkeypatch.setattr("trainscale.runner.launch.execute_run", lambda *a, **k: started.append(a))
    with pytest.raises(ConfigError) as caught:
        call()
    message = str(caught.value)
    assert f"no option {name!r}" in message and "valid options: " in message
    if near:
        assert f"did you mean {near!r}?" in message
    assert "\n" not in message
    assert not started


def test_a_mistake_raises_the_cli_one_line_and_stores_nothing(tmp_path, capsys):
    store = tmp_path / "api.db"
    with pytest.raises(TrainscaleError) as caught:
        trainscale.run("mnist-cnn", workers=2, store=store, **{**CHEAP, "global_batch_size": 15})
    flags = ["--workers", "2", *CHEAP_FLAGS, "--global-batch-size", "15", "--store", str(store)]
    assert run_cli(["run", "mnist-cnn", *flags]) == 2
    assert one_error_line(capsys) == f"trainscale: error: {caught.value}"
    with pytest.raises(TrainscaleError, match="valid workloads"):
        trainscale.run("no-such-workload", store=store)
    # What the command line refuses as a pair (argparse's exclusive options) is refused here.
    with pytest.raises(ConfigError, match="give --epochs or --steps, not both"):
        trainscale.run("mnist-cnn", store=store, **{**CHEAP, "epochs": 1})
    assert not store.exists() or not RunStore(store).list_runs()


def test_a_failed_run_raises_with_its_id_and_reason_and_is_stored_failed(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("TRAINSCALE_FAULT_INJECT", "crash:rank=0:step=2")
    store = tmp_path / "api.db"
    with pytest.raises(trainscale.RunFailed) as caught:
        trainscale.run("mnist-cnn", store=store, **CHEAP)
    failure = caught.value
    assert "injected crash" in failure.reason
    record = _only_run(store)
    assert failure.run_id == record.run_id
    assert record.status == "failed" and failure.reason == record.error
    assert f"run {record.run_id[:8]} failed" in str(failure)
    assert "Traceback" not in capsys.readouterr().err  # quiet: nothing printed by default


def test_progress_says_the_batch_split_and_quiet_says_nothing(tmp_path, capsys, monkeypatch):
    from trainscale.runner.launch import RunFailed

    def stand_in(options, store=None, quiet=False, sweep=None, config=None):
        raise RunFailed("run0001", f"stand-in, quiet={quiet}")

    monkeypatch.setattr("trainscale.runner.launch.execute_run", stand_in)
    with pytest.raises(RunFailed, match="quiet=True"):
        trainscale.run("mnist-cnn", store=tmp_path / "s.db", **CHEAP)
    assert capsys.readouterr().err == ""
    with pytest.raises(RunFailed, match="quiet=False"):
        trainscale.run("mnist-cnn", store=tmp_path / "s.db", progress=True, **CHEAP)
    choice = choose_precision("auto", "cpu")
    assert capsys.readouterr().err == (
        "trainscale: global batch 16 = 1 worker x 16 per worker\n"
        f"trainscale: precision {choice.precision} ({choice.reason})\n"
    )
