"""`trainscale.bench`, `sweep`, `compare` and `report`: the CLI's studies as functions, with
one row per configuration in their DataFrames."""

from __future__ import annotations

import pytest

import trainscale
from trainscale.errors import ConfigError
from trainscale.reporting.csv_table import CSV_COLUMNS
from trainscale.results.store import RunStore

TINY = """
name = "tiny"
[base]
workload = "mnist-cnn"
data = "synthetic"
steps = 3
evaluate = false
batch_size = 8
threads_per_worker = 1
warmup_steps = 1
[grid]
seed = [0, 1]
"""


def test_bench_gives_one_row_per_configuration(tmp_path, monkeypatch):
    from trainscale.benchmark import run as bench_run

    # The first two settings of the ladder (the serial baseline and one more) keep it short.
    plan = bench_run.plan_ladder
    monkeypatch.setattr(bench_run, "plan_ladder", lambda *args: plan(*args)[:2])
    store = tmp_path / "b.db"
    result = trainscale.bench(
        data="synthetic", quick=True, steps=2, rounds=1, out=None, store=store
    )
    assert result.data == "synthetic" and result.out is None
    with RunStore(store) as opened:
        stored = opened.list_runs(tag=f"bench:{result.bench_id}")
    assert sorted(r.run_id for r in result.runs) == sorted(r.run_id for r in stored)
    completed = {r.config_hash for r in stored if r.status == "completed"}
    frame = result.to_dataframe()
    assert list(frame.columns) == ["setting", *CSV_COLUMNS]
    assert len(frame) == len(completed) >= 1
    assert set(frame["config_hash"]) == completed
    # Each row is named as the bench's table names its setting; the baseline is the first.
    names = [row["setting"] for row in result.table]
    assert set(frame["setting"]) <= set(names)
    baseline = frame[frame["baseline"]]
    assert baseline["setting"].tolist() == ["serial 1 core (baseline)"]
    assert baseline["speedup"].tolist() == [pytest.approx(1.0)]
    assert result.to_dict()["runs"][0]["run_id"] == result.runs[0].run_id
    # to_dict() is `trainscale bench --json` (tests/cli/test_bench_cli.py): the same fields.
    document = result.to_dict()
    assert document["table"] == [dict(row) for row in result.table]
    assert document["baselines"] == list(result.baselines) and result.baselines
    assert document["gpu_verdicts"] == list(result.gpu_verdicts) == []


def test_a_sweep_then_its_comparison_and_report(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    store = tmp_path / "s.db"
    planned = trainscale.sweep(spec, dry_run=True, store=store)
    assert planned.dry_run and len(planned.planned) == 2
    assert planned.to_dataframe()["label"].tolist() == ["seed=0", "seed=1"]
    assert not store.exists() or not RunStore(store).list_runs()

    result = trainscale.sweep(str(spec), store=store)
    assert len(result.completed) == 2 and not result.failed
    with RunStore(store) as opened:
        stored = opened.sweep_runs(result.sweep_id)
    assert sorted(r.run_id for r in result.runs) == sorted(r.run_id for r in stored)
    frame = result.to_dataframe()
    assert list(frame.columns) == list(CSV_COLUMNS)
    assert sorted(frame["configuration"]) == ["seed=0", "seed=1"]
    assert frame["runs"].tolist() == [1, 1]

    first, second = result.runs
    comparison = trainscale.compare(first, second, store=store, resamples=1000)
    assert comparison.to_dict()["comparisons"][0]["a_runs"] == [first.run_id]
    assert comparison.throughput_ratio == comparison.rows[0]["throughput_ratio"] > 0
    compared = comparison.to_dataframe()
    assert len(compared) == 1
    assert {"throughput_ratio_ci_low", "throughput_ratio_ci_high"} <= set(compared.columns)

    written = trainscale.report(sweep=result, out=tmp_path / "report", store=store)
    assert written.html.is_file() and written.markdown.is_file() and written.csv.is_file()
    assert written.plots and all(p.suffix == ".png" and p.is_file() for p in written.plots)
    assert written.to_dataframe()["configuration"].tolist() == frame["configuration"].tolist()
    document = written.to_dict()  # `trainscale report --json`'s object
    assert document["html"] == str(written.html) and document["plots"] == [
        str(p) for p in written.plots
    ]
    assert document["configurations"] == [dict(row) for row in written.configurations]
    assert [w["workload"] for w in document["workloads"]] == ["mnist-cnn"]
    assert document["runs_completed"] == 2 and document["not_completed"] == []
    # The same runs by the tag the sweep stored them with.
    tagged = trainscale.report(tag=f"sweep:{result.sweep_id[:8]}", out=tmp_path / "t", store=store)
    assert tagged.to_dataframe()["runs"].tolist() == [1, 1]


def test_study_mistakes_are_the_cli_errors(tmp_path):
    with pytest.raises(ConfigError, match="valid recipes"):
        trainscale.sweep("no-such-recipe", store=tmp_path / "s.db")
    with pytest.raises(ConfigError, match="--steps must be at least 2"):
        trainscale.bench(steps=0, store=tmp_path / "b.db")
    with pytest.raises(ConfigError, match="status must be one of"):
        trainscale.runs(status="done", store=tmp_path / "b.db")
