"""Every command that reads stored runs goes on past a run whose stored JSON is damaged: it
names the run in one warning line and works with the rest; naming that run is one error."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.report_store import FixtureConfig, build_store
from tests.helpers.report_store import run_id as report_run_id
from tests.helpers.simulate import add_emulation, add_measured_run, run_id

BREAKDOWN = {"data": 0.001, "forward": 0.03, "backward": 0.06, "optimizer": 0.009}
JSON_COLUMNS = ["config_json", "env_json", "summary_json"]


def damage(path: Path, table: str, column: str, ident: str) -> None:
    """Break one stored JSON cell, as a hand edit or a bad disk would."""
    id_column = {"runs": "run_id", "sweeps": "sweep_id"}[table]
    with sqlite3.connect(path) as conn:
        changed = conn.execute(
            f"UPDATE {table} SET {column} = '{{broken' WHERE {id_column} = ?", (ident,)
        ).rowcount
    conn.close()
    assert changed == 1


def warning_line(capsys: pytest.CaptureFixture[str], ident: str, column: str) -> str:
    """stdout, after checking stderr is exactly the one warning naming the damaged run."""
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"trainscale: warning: run {ident[:8]} has damaged stored JSON ({column}); left out"
    ]
    return captured.out


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """S: two short synthetic runs, the older one to be damaged."""
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        add_measured_run(store, run_id(1), step_s=0.1, breakdown=BREAKDOWN)
        add_measured_run(store, run_id(2), step_s=0.104, breakdown=BREAKDOWN, repeat=1)
    return path


@pytest.mark.parametrize("column", JSON_COLUMNS)
def test_runs_list_and_export_leave_the_damaged_run_out(
    two_runs: Path, capsys: pytest.CaptureFixture[str], column: str
) -> None:
    damage(two_runs, "runs", column, run_id(1))
    store = ["--store", str(two_runs)]

    assert run_cli(["runs", "list", *store]) == 0
    out = warning_line(capsys, run_id(1), column)
    assert [line.split()[0] for line in out.splitlines()[1:]] == [run_id(2)[:8]]

    assert run_cli(["runs", "export", "--format", "csv", *store]) == 0
    rows = list(csv.DictReader(io.StringIO(warning_line(capsys, run_id(1), column))))
    assert [row["run_id"] for row in rows] == [run_id(2)]

    assert run_cli(["runs", "export", "--format", "json", *store]) == 0
    items = json.loads(warning_line(capsys, run_id(1), column))
    assert [item["run_id"] for item in items] == [run_id(2)]


@pytest.mark.parametrize("column", JSON_COLUMNS)
def test_runs_show_of_the_damaged_run_is_one_error(
    two_runs: Path, capsys: pytest.CaptureFixture[str], column: str
) -> None:
    damage(two_runs, "runs", column, run_id(1))
    assert run_cli(["runs", "show", run_id(1)[:10], "--store", str(two_runs)]) == 2
    assert one_error_line(capsys) == (
        f"trainscale: error: run {run_id(1)} has damaged stored JSON ({column}); it cannot be read"
    )
    assert run_cli(["runs", "show", run_id(2), "--store", str(two_runs)]) == 0


def _sweep_store(tmp_path: Path) -> Path:
    """A sweep of mnist-cnn at 1 and 2 workers, two runs each."""
    configs = [
        FixtureConfig(f"workers={w}", "mnist-cnn", w, 1, "compact", [100.0 * w, 101.0 * w])
        for w in (1, 2)
    ]
    return build_store(tmp_path / "sweep.db", configs)


def test_report_of_a_sweep_leaves_the_damaged_run_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _sweep_store(tmp_path)
    damaged = report_run_id(1, 0)
    damage(path, "runs", "summary_json", damaged)
    out = tmp_path / "report"
    assert run_cli(["report", "--sweep", "5eed", "--out", str(out), "--store", str(path)]) == 0
    warning_line(capsys, damaged, "summary_json")
    rows = list(csv.DictReader(io.StringIO((out / "report.csv").read_text())))
    assert {row["configuration"]: row["runs"] for row in rows} == {
        "workers=1": "2",
        "workers=2": "1",
    }
    assert damaged not in (out / "report.md").read_text()

    # Named explicitly, the damaged run is refused rather than silently dropped.
    code = run_cli(
        ["report", "--runs", damaged[:8], report_run_id(0, 0)[:8], "--out", str(out)]
        + ["--store", str(path)]
    )
    assert code == 2
    assert "has damaged stored JSON (summary_json)" in one_error_line(capsys)


def test_sweeps_list_and_report_of_a_damaged_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = FixtureConfig("one", "mnist-cnn", 1, 1, "compact", [100.0])
    path = build_store(tmp_path / "sweep.db", [config])
    with RunStore(path) as store:
        store.create_sweep("0ther000" + "0" * 24, "other", "other.toml", "h", {}, [])
    damage(path, "sweeps", "plan_json", "5eed0000aaaabbbbccccddddeeeeffff")
    assert run_cli(["runs", "sweeps", "--store", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "trainscale: warning: sweep 5eed0000 has damaged stored JSON (plan_json); left out"
    ]
    assert [line.split()[0] for line in captured.out.splitlines()[1:]] == ["0ther000"]
    code = run_cli(
        ["report", "--sweep", "5eed", "--out", str(tmp_path / "r"), "--store", str(path)]
    )
    assert code == 2
    assert "sweep 5eed0000aaaabbbbccccddddeeeeffff has damaged" in one_error_line(capsys)


def test_compare_skips_a_damaged_sweep_run_and_refuses_a_named_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = FixtureConfig("one", "mnist-cnn", 1, 1, "compact", [100.0, 101.0, 99.0])
    path = build_store(tmp_path / "a.db", [config])
    damaged = report_run_id(0, 1)
    damage(path, "runs", "config_json", damaged)
    store = ["--store", str(path)]
    # The sweep (its three repeats, one damaged) against one of its own runs.
    assert run_cli(["compare", "5eed", report_run_id(0, 0)[:8], *store, "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"trainscale: warning: run {damaged[:8]} has damaged stored JSON (config_json); left out"
    ]
    (row,) = json.loads(captured.out)["comparisons"]
    assert damaged not in row["a_runs"] and len(row["a_runs"]) == 2

    assert run_cli(["compare", damaged[:8], report_run_id(0, 0)[:8], *store]) == 2
    assert f"run {damaged} has damaged stored JSON (config_json)" in one_error_line(capsys)


@pytest.fixture
def sim_store(tmp_path: Path) -> Path:
    path = tmp_path / "sim.db"
    with RunStore(path) as store:
        add_measured_run(store, run_id(1), step_s=0.1, breakdown=BREAKDOWN)
        add_measured_run(store, run_id(2), step_s=0.104, breakdown=BREAKDOWN, repeat=1)
        add_measured_run(store, run_id(3), workers=2, batch_size=32, step_s=0.055)
        add_measured_run(store, run_id(4), step_s=0.3, repeat=2)  # to be damaged
        for n, workers in enumerate((1, 2)):
            add_emulation(store, run_id(10 + n), workers=workers, steps_to_target=2000 - 900 * n)
        add_emulation(store, run_id(12), workers=4, steps_to_target=700)  # to be damaged
    damage(path, "runs", "summary_json", run_id(4))
    damage(path, "runs", "config_json", run_id(12))
    return path


def test_simulate_validate_and_calibrate_from(
    sim_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(["simulate", "--validate", "--store", str(sim_store), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert sorted(captured.err.splitlines()) == [
        f"trainscale: warning: run {run_id(4)[:8]} has damaged stored JSON (summary_json); "
        "left out",
        f"trainscale: warning: run {run_id(12)[:8]} has damaged stored JSON (config_json); "
        "left out",
    ]
    held_out = {row["run_id"] for row in json.loads(captured.out)["rows"]}
    assert run_id(4) not in held_out and held_out

    args = ["simulate", "mnist-cnn", "--cluster", "cpu-25gbe", "--store", str(sim_store)]
    assert run_cli([*args, "--calibrate-from", run_id(4)[:12]]) == 2
    assert "has damaged stored JSON (summary_json)" in one_error_line(capsys)


def test_predict_time_to_accuracy_leaves_a_damaged_emulation_out(
    sim_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(
        ["predict-time-to-accuracy", "mnist-cnn", "--cluster", "cpu-25gbe", "--json"]
        + ["--samples", "101", "--store", str(sim_store)]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"run {run_id(12)[:8]} has damaged stored JSON (config_json)" in captured.err
    assert sorted(row["workers"] for row in json.loads(captured.out)["rows"]) == [1, 2]


def test_a_report_and_a_comparison_read_edited_machine_facts_as_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Valid JSON of the wrong types (a hand edit): not damaged, but no fact a reader can use.
    path = _sweep_store(tmp_path)
    edited = json.dumps({"hostname": ["box"], "cpu_model": 7, "usable_cores": "0-3"})
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET env_json = ?", (edited,))
    conn.close()
    out = tmp_path / "report"
    assert run_cli(["report", "--sweep", "5eed", "--out", str(out), "--store", str(path)]) == 0
    assert (out / "report.md").exists()
    pair = [report_run_id(0, 0)[:8], report_run_id(1, 0)[:8]]
    assert run_cli(["compare", *pair, "--store", str(path)]) == 0
    assert capsys.readouterr().err == ""
