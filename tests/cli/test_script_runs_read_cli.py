"""Script runs in every command that reads the store: `runs list`, `runs show`, `compare`,
`report` (Markdown, HTML, CSV, plots) say what a script run measured (its data wait, the
input-bound diagnosis, ranks that disagreed); `simulate` predicts a script from its stored
runs, and `recommend` (which runs its trials itself) refuses a stored script name in one line.

The store is made once for the module (three real script runs, about 25 s on 2 cores): the
example script with 1 worker and with 2, and a small script whose two ranks disagree (rank 0
passes the global batch and takes one step more) and whose steps wait for data most of the
time (input-bound) on real data with an evaluation.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist_script.py"
SMALL = ["--max-steps", "12", "--train-samples", "1536", "--test-samples", "64"]

DISAGREEING = """\
import time

import torch.distributed as dist

import trainscale

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
meter = trainscale.meter()
for _ in range(8 if rank == 0 else 7):  # rank 0 takes one step more
    time.sleep(0.02)  # the data loader: most of the step
    # Rank 0 passes the global batch, the other rank its own part.
    with meter.step(samples=8 * world if rank == 0 else 8):
        time.sleep(0.005)
meter.evaluate(accuracy=0.75)
dist.destroy_process_group()
"""


@dataclass
class ScriptStore:
    path: Path
    serial: str
    parallel: str
    disagreeing: str
    disagreeing_stderr: str


def _run(args: list[str]) -> tuple[str, str]:
    """Run `trainscale ARGS` in-process, exit 0 asserted; (stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = run_cli(args)
    assert status == 0, err.getvalue()
    return out.getvalue(), err.getvalue()


def _newest_id(store: Path) -> str:
    with RunStore(store, create=False) as opened:
        return opened.list_runs(limit=1)[0].run_id


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> ScriptStore:
    folder = tmp_path_factory.mktemp("script-runs")
    store = folder / "runs.db"
    base = ["run", str(EXAMPLE), "--data", "synthetic", "--store", str(store)]
    _run([*base, "--workers", "1", "--threads-per-worker", "1", "--", *SMALL])
    serial = _newest_id(store)
    _run([*base, "--workers", "2", "--threads-per-worker", "1", "--", *SMALL])
    parallel = _newest_id(store)
    script = folder / "disagree.py"
    script.write_text(DISAGREEING)
    _, err = _run(
        ["run", str(script), "--workers", "2", "--threads-per-worker", "1", "--warmup-steps", "1"]
        + ["--target-accuracy", "0.7", "--store", str(store), "--"]
    )
    return ScriptStore(store, serial, parallel, _newest_id(store), err)


def _read(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert run_cli(args) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.out


def test_the_run_warns_once_of_ranks_that_disagree(scripts: ScriptStore) -> None:
    warnings = [
        line for line in scripts.disagreeing_stderr.splitlines() if "ranks passed different" in line
    ]
    assert len(warnings) == 1, scripts.disagreeing_stderr
    (line,) = warnings
    assert line.startswith(f"trainscale: warning: run {scripts.disagreeing[:8]}: ")
    assert "median per rank: 16, 8" in line and "24 samples a step" in line
    assert "too high if a rank passed the global batch" in line
    assert "different numbers of steps (8, 7)" in line and "the 7 steps every rank took" in line


def test_runs_list_shows_script_runs_and_their_notes(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _read(["runs", "list", "--store", str(scripts.path)], capsys)
    rows = {line[:8]: line for line in out.splitlines()[1:]}
    for run_id in (scripts.serial, scripts.parallel):
        row = rows[run_id[:8]]
        assert "script:mnist_script.py" in row and "script" in row and "synthetic" in row
        assert "input-bound" not in row
    assert "1 x 1" in rows[scripts.serial[:8]] and "2 x 1" in rows[scripts.parallel[:8]]
    row = rows[scripts.disagreeing[:8]]
    assert "script:disagree.py" in row and "real" in row and "0.7500" in row
    assert "input-bound: data wait" in row and "ranks disagree" in row


@pytest.mark.parametrize("name", ["script:disagree.py", "SCRIPT"])
def test_runs_list_selects_a_scripts_runs_by_its_name_or_its_file(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    # The file is never imported as a workload file: that would run the script here.
    workload = str(scripts.path.parent / "disagree.py") if name == "SCRIPT" else name
    args = ["runs", "list", "--workload", workload, "--store", str(scripts.path)]
    rows = _read(args, capsys).splitlines()[1:]
    assert [row[:8] for row in rows] == [scripts.disagreeing[:8]]


def test_runs_show_says_the_data_wait_and_the_frameworks(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _read(["runs", "show", scripts.parallel[:8], "--store", str(scripts.path)], capsys)
    lines = {line.split("  ")[0]: line for line in out.splitlines()}
    assert "% of the step time (median " in lines["data wait"]
    assert "input-bound" not in out and "ranks disagree" not in lines
    assert lines["framework"].split()[1] == "pytorch"  # what the script used
    assert lines["global batch size"].split()[-1] == "128"  # measured: 2 x 64
    assert "global_batch_measured" in out and "samples_per_worker_median" in out


def test_runs_show_of_an_input_bound_run_whose_ranks_disagree(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _read(["runs", "show", scripts.disagreeing[:8], "--store", str(scripts.path)], capsys)
    text = " ".join(out.split())  # the table wraps long values
    assert "input-bound, the model waits for its data" in text and "num_workers" in text
    assert "ranks disagree the ranks passed different samples= in 7 step(s)" in text
    assert "different numbers of steps (8, 7)" in text


def test_compare_two_settings_of_a_script(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["compare", scripts.serial[:8], scripts.parallel[:8], "--store", str(scripts.path)]
    (row,) = json.loads(_read([*args, "--json"], capsys))["comparisons"]
    assert row["a_workload"] == row["b_workload"] == "script:mnist_script.py"
    assert (row["a_global_batch_size"], row["b_global_batch_size"]) == (64, 128)
    assert row["b"]["samples_per_step"] == 128 and row["throughput_ratio"] > 0
    assert not any("input-bound" in w or "disagreed" in w for w in row["warnings"])


def test_compare_warns_of_an_input_bound_side_whose_ranks_disagree(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["compare", scripts.parallel[:8], scripts.disagreeing[:8], "--store", str(scripts.path)]
    out = " ".join(_read(args, capsys).split())
    assert "different workloads (script:mnist_script.py vs script:disagree.py)" in out
    assert "B: 1 of 1 run(s) input-bound (data wait up to" in out
    assert "B: the ranks of a script run disagreed" in out
    assert "A: 1 of 1 run(s) input-bound" not in out


def test_report_of_script_runs(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ids = [scripts.serial[:8], scripts.parallel[:8], scripts.disagreeing[:8]]
    out_dir = tmp_path / "report"
    _read(["report", "--runs", *ids, "--out", str(out_dir), "--store", str(scripts.path)], capsys)
    markdown = (out_dir / "report.md").read_text()
    assert "## script:mnist\\_script.py" in markdown and "## script:disagree.py" in markdown
    assert "1 script configuration(s) are input-bound" in markdown
    assert "Some script runs' ranks disagreed" in markdown
    assert markdown.count("data wait ") >= 3  # each configuration's notes
    assert "| 0.7500 |" in markdown  # the script's own evaluation, on real data
    assert "data wait" in (out_dir / "report.html").read_text()
    with (out_dir / "report.csv").open() as table:
        rows = {row["workload"] + row["workers"]: row for row in csv.DictReader(table)}
    assert float(rows["script:disagree.py2"]["data_wait_share"]) > 0.5
    assert float(rows["script:mnist_script.py2"]["data_wait_share"]) < 0.5
    plots = {p.name for p in out_dir.glob("*.png")}
    assert any("throughput" in p for p in plots) and any("accuracy" in p for p in plots), plots


def test_recommend_of_a_stored_script_name_is_one_line(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # recommend runs the script itself (its trials): a stored name is no script to run.
    capsys.readouterr()
    assert run_cli(["recommend", "script:mnist_script.py", "--store", str(scripts.path)]) == 2
    assert "mnist_script.py" in one_error_line(capsys)


@pytest.mark.parametrize("target", ["script:mnist_script.py", str(EXAMPLE)])
def test_simulate_predicts_a_script_from_its_stored_runs(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    # The example tells the meter its model, so its runs carry what the simulator needs.
    capsys.readouterr()
    assert run_cli(["simulate", target, "--store", str(scripts.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_simulate_validate_says_script_runs_are_not_modelled(
    scripts: ScriptStore, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert run_cli(["simulate", "--validate", "--store", str(scripts.path)]) == 2
    assert "validation takes workloads; `trainscale simulate script:" in one_error_line(capsys)
