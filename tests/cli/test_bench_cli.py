"""`trainscale bench`: mistakes cost one line before any rung runs, and nothing is written."""

from __future__ import annotations

import re

import pytest

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.mnist_files import write_random_mnist


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No real cache, data or home directory leaks into these tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def rungs(monkeypatch):
    """Stands in for execute_run: records every rung started (none should be)."""
    started = []

    def fake(options, store_path=None, *args, **kwargs):
        started.append(options)
        raise AssertionError("a rung started")

    monkeypatch.setattr("trainscale.runner.launch.execute_run", fake)
    return started


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--steps", "0"], "--steps must be at least 2"),
        (["--steps", "-5"], "got -5"),
        (["--steps", "1"], "--steps must be at least 2 (a run's first step pays"),
        (["--steps", str(10**10)], "--steps must be at most 1,000,000,000"),
        (["--rounds", "0"], "--rounds must be a whole number >= 1, got 0"),
        (["--rounds", "31"], "--rounds 31 is more than the 30 steps a rung trains"),
        (["--rounds", "two"], "--rounds"),
        (["--store", "no/such/dir/b.db"], "no/such/dir"),
        (["--out", "."], "it is a directory"),
        (["--out", "no/such/dir/t.md"], "is missing"),
    ],
)
def test_mistakes_cost_one_line_before_any_rung(args, fragment, rungs, tmp_path, capsys):
    code = run_cli(["bench", "--data", "synthetic", "--quick", *args])
    assert code == 2
    assert fragment in one_error_line(capsys)
    assert not rungs
    assert not (tmp_path / "trainscale-bench.md").exists()


def test_a_training_set_smaller_than_the_batch_fails_before_any_rung(rungs, tmp_path, capsys):
    tiny = write_random_mnist(tmp_path / "mnist", 50, 10)  # the recipe's batch is 64
    args = ["bench", "--data", "real", "--data-dir", str(tiny), "--no-download", "--quick"]
    assert run_cli(args) == 2
    assert "50 of 50 samples" in one_error_line(capsys)
    assert not rungs
    assert not (tmp_path / "trainscale-bench.md").exists()


def test_without_data_the_first_line_says_how_to_give_it(monkeypatch, tmp_path, capsys):
    from trainscale.errors import DataError
    from trainscale.runner.launch import RunFailed

    def offline(url, *args, **kwargs):
        raise DataError(f"could not download {url} (offline in this test)")

    def fails(options, *args, **kwargs):  # the rungs are not what this test is about
        raise RunFailed("run0001", "stand-in")

    monkeypatch.setattr("trainscale.data.cache.download", offline)
    monkeypatch.setattr("trainscale.runner.launch.execute_run", fails)
    run_cli(["bench", "--quick", "--out", str(tmp_path / "t.md")])
    captured = capsys.readouterr()
    first = captured.err.splitlines()[0]
    assert first.startswith("REAL DATA NOT FOUND, measuring on SYNTHETIC data (throughput only)")
    assert "--data-dir DIR" in first and "TRAINSCALE_DATA_DIR=DIR" in first
    assert len(first) <= 130  # one short line, not the list of every place looked in
    assert "Where the data was looked for:" in (tmp_path / "t.md").read_text()


def test_a_short_synthetic_bench_runs_its_rungs_in_rotated_rounds(tmp_path, capsys):
    from trainscale.results.store import RunStore

    store = tmp_path / "bench.db"
    args = ["bench", "--quick", "--data", "synthetic", "--rounds", "2", "--steps", "3"]
    # Two rounds exactly, however busy the test machine is (busy rounds: test_bench_run.py).
    args += ["--max-extra-rounds", "0"]
    assert run_cli([*args, "--store", str(store), "--out", "t.md"]) == 0
    captured = capsys.readouterr()
    assert "round 2/2" in captured.err
    # Piped, the table's rows stay whole: no setting name folded over several lines.
    assert "│ serial 1 core (baseline) " in captured.out
    assert all(len(line) > 80 for line in captured.out.splitlines() if "│ serial 1 core" in line)
    with RunStore(store) as opened:
        runs = sorted(opened.list_runs(), key=lambda r: r.created_at)
    assert {r.status for r in runs} == {"completed"}
    assert len({r.tag for r in runs}) == 1 and runs[0].tag.startswith("bench:")

    def setting(record):
        return (record.world_size, record.threads_per_worker, record.affinity)

    rounds = [[setting(r) for r in runs if r.repeat_index == i] for i in (0, 1)]
    assert len(runs) == 2 * len(rounds[0]) and len(rounds[0]) >= 1
    # In start order: all of round 0, then round 1 starting at the second rung.
    assert [r.repeat_index for r in runs] == [0] * len(rounds[0]) + [1] * len(rounds[0])
    assert rounds[1] == rounds[0][1:] + rounds[0][:1]
    assert all(r.summary["num_steps"] == 2 for r in runs)  # 3 steps split over 2 rounds
    # Runs shorter than the usual warm-up still time a step: their second, not their first.
    assert all(r.summary["warmup_steps_excluded"] == 1 for r in runs)
    assert all(r.summary["num_timed_steps"] == 1 for r in runs)
    table = (tmp_path / "t.md").read_text()
    assert "train 2 steps a run (1 warm-up step a run untimed, fewer than the usual 5" in table
    assert "in 2 round(s) (--steps 3 split over the planned rounds, rounded up)" in table
    assert "2 round(s): with fewer than 5 rounds the interval is wide" in table
    interval = re.search(r"\| \d+\.\d\dx \[\d+\.\d\d, \d+\.\d\d\] \|", table)
    busy = any(r.summary.get("contention", {}).get("verdict") == "busy" for r in runs)
    if len(rounds[0]) > 1 and not busy:  # speedups with their interval over rounds
        assert interval
    elif len(rounds[0]) > 1:
        # A busy round is left out of its pairs (one quiet round left has no interval), or,
        # busy in both, the speedup rests on them and is not trusted: the row says which.
        assert interval or "a busy run here or in the serial run" in table


def test_json_is_the_benchs_document_on_stdout_and_nothing_else(tmp_path, capsys, monkeypatch):
    import json

    from trainscale.benchmark import run as bench_run
    from trainscale.results.store import RunStore

    plan = bench_run.plan_ladder  # the serial baseline and one more setting keep it short
    monkeypatch.setattr(bench_run, "plan_ladder", lambda *args: plan(*args)[:2])
    store = tmp_path / "bench.db"
    args = ["bench", "--quick", "--data", "synthetic", "--rounds", "1", "--steps", "2"]
    assert run_cli([*args, "--store", str(store), "--out", "t.md", "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)  # stdout is the document, whole
    assert "table written to t.md" in captured.err and "│" not in captured.out

    with RunStore(store) as opened:
        stored = opened.list_runs(tag=f"bench:{document['bench_id']}")
    assert [run["run_id"] for run in document["runs"]] == [r.run_id for r in reversed(stored)]
    assert (document["data"], document["rounds"], document["out"]) == ("synthetic", 1, "t.md")
    names = [row["setting"] for row in document["table"]]
    assert names[0] == "serial 1 core (baseline)" and len(names) == 2
    completed = {r.config_hash for r in stored if r.status == "completed"}
    assert {row["config_hash"] for row in document["configurations"]} == completed
    assert {row["setting"] for row in document["configurations"]} <= set(names)
    assert document["gpu_verdicts"] == []  # no GPU here: no verdict claimed
    assert (tmp_path / "t.md").is_file()


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "mnist-cnn", "--data", "real", "--data-dir", "{missing}"],
        ["recommend", "mnist-cnn", "--data", "real", "--data-dir", "{missing}"],
        ["bench", "{script}", "--framework", "jax"],
    ],
)
def test_a_refused_bench_or_search_leaves_no_empty_store(argv, tmp_path, capsys):
    from pathlib import Path

    script = tmp_path / "train.py"
    script.write_text("import trainscale\nmeter = trainscale.meter()\n")
    given = [a.format(missing=tmp_path / "none", script=script) for a in argv]
    store = tmp_path / "runs.db"
    assert run_cli([*given, "--store", str(store)]) == 2
    assert one_error_line(capsys) and not Path(store).exists()
