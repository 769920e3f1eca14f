"""`trainscale sweep` end to end: bad files, a real sweep, and SIGKILL then --resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from trainscale.results.store import RunStore
from trainscale.sweeps.recipes import RECIPES

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.mnist_files import write_random_mnist

TINY = """
name = "tiny"
repeats = {repeats}
[base]
workload = "mnist-cnn"
data = "synthetic"
steps = {steps}
evaluate = false
batch_size = 8
threads_per_worker = 1
warmup_steps = 1
[grid]
seed = [0, 1]
"""


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('[base]\nworkload = "mnist-cnn"\ncolour = "red"\n', "base.colour: unknown run option"),
        ('[base]\nworkload = "mnist-cnn"\n[grid]\nworkers = []\n', "grid.workers: is empty"),
        ('[base]\nworkload = "mnist-cnn"\nworkers = "2"\n', "base.workers"),
        ('[base]\nworkload = "no-such"\n', "valid workloads"),
        ("[base\n", "not valid TOML"),
        # 10^8 configurations: refused from the axes' lengths, none of them built.
        (
            'repeats = 10\n[base]\nworkload = "mnist-cnn"\n[grid]\n'
            + "".join(f"{key} = {list(range(1, 101))}\n" for key in ("seed", "steps", "eval_every"))
            + "lr = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]\n",
            "100,000,000 runs, more than the 10,000",
        ),
        # No grid: the repeats or the points alone (a huge count was built before refusing).
        (
            'repeats = 99999999999999999999\n[base]\nworkload = "mnist-cnn"\n',
            "repeats: 99,999,999,999,999,999,999 repeats = 99,999,999,999,999,999,999 runs",
        ),
        (
            'repeats = 3\n[base]\nworkload = "mnist-cnn"\n' + "[[points]]\nseed = 1\n" * 4000,
            "points: 4,000 points x 3 repeats = 12,000 runs, more than the 10,000",
        ),
    ],
)
def test_bad_sweep_files_fail_in_one_line_before_any_run(tmp_path, capsys, content, fragment):
    spec = tmp_path / "bad.toml"
    spec.write_text(content)
    store = tmp_path / "s.db"
    assert run_cli(["sweep", str(spec), "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert fragment in err
    assert not store.exists() or not RunStore(store).list_runs()


def test_quick_needs_a_recipe_and_unknown_recipes_are_named(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('[base]\nworkload = "mnist-cnn"\n')
    assert run_cli(["sweep", str(spec), "--quick", "--store", str(tmp_path / "s.db")]) == 2
    assert "--quick" in capsys.readouterr().err
    assert run_cli(["sweep", "--recipe", "nope", "--store", str(tmp_path / "s.db")]) == 2
    assert "valid recipes" in capsys.readouterr().err
    # An empty name is a name like any other, not "no recipe" (it used to end in a TypeError).
    assert run_cli(["sweep", "--recipe", "", "--store", str(tmp_path / "s.db")]) == 2
    assert "unknown recipe ''; valid recipes" in one_error_line(capsys)


def test_dry_run_lists_the_plan_and_runs_nothing(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(TINY.format(repeats=2, steps=3))
    store = tmp_path / "s.db"
    assert run_cli(["sweep", str(spec), "--store", str(store), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(None, 1)[0] for line in out] == ["0", "1", "2", "3"]
    assert not RunStore(store).list_runs()


def test_json_is_the_sweep_as_one_object_on_stdout(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(TINY.format(repeats=1, steps=3))
    store = tmp_path / "s.db"
    assert run_cli(["sweep", str(spec), "--store", str(store), "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["sweep_id"] is None and planned["runs"] == []
    assert [run["label"] for run in planned["planned"]] == ["seed=0", "seed=1"]
    assert not RunStore(store).list_runs()

    assert run_cli(["sweep", str(spec), "--store", str(store), "--json"]) == 0
    captured = capsys.readouterr()
    done = json.loads(captured.out)  # stdout is the document, whole; the table went to stderr
    assert "seed=0" in captured.err
    with RunStore(store) as opened:
        stored = opened.list_runs(sweep_id=done["sweep_id"])
    assert sorted(done["completed"]) == sorted(r.run_id for r in stored)
    assert [run["run_id"] for run in done["runs"]] == [r.run_id for r in reversed(stored)]
    assert (done["name"], done["failed"], done["resumed"]) == ("tiny", [], False)
    assert sorted(row["configuration"] for row in done["configurations"]) == ["seed=0", "seed=1"]


@pytest.mark.parametrize("dry_run", [True, False])
def test_an_unwritable_report_path_fails_before_the_first_run(tmp_path, capsys, dry_run):
    spec = tmp_path / "s.toml"
    spec.write_text(TINY.format(repeats=1, steps=3))
    store = tmp_path / "s.db"
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    args = ["sweep", str(spec), "--store", str(store), "--report", str(afile / "report")]
    assert run_cli([*args, *(["--dry-run"] if dry_run else [])]) == 2
    assert "afile" in one_error_line(capsys)
    assert not RunStore(store).list_runs()


def test_a_report_directory_to_be_made_is_not_made_by_a_dry_run(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(TINY.format(repeats=1, steps=3))
    report = tmp_path / "new" / "report"
    args = ["sweep", str(spec), "--store", str(tmp_path / "s.db"), "--report", str(report)]
    assert run_cli([*args, "--dry-run"]) == 0
    assert not (tmp_path / "new").exists()


def _count(store: Path, status: str) -> int:
    if not store.exists():
        return 0
    try:
        with RunStore(store) as s:
            return len(s.list_runs(status=status))
    except Exception:  # the file may be mid-creation
        return 0


def test_sigkill_then_resume_loses_and_duplicates_nothing(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY.format(repeats=2, steps=30))
    store = tmp_path / "s.db"
    cmd = [sys.executable, "-m", "trainscale", "sweep", str(spec), "--store", str(store)]
    env = {k: v for k, v in os.environ.items() if k != "TRAINSCALE_FAULT_INJECT"}
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        # Kill it while its second run is training: one completed, one running.
        while time.monotonic() < deadline:
            if _count(store, "completed") >= 1 and _count(store, "running") == 1:
                break
            assert proc.poll() is None, "the sweep ended before it could be killed"
            time.sleep(0.2)
        else:
            pytest.fail("the sweep never reached its second run")
        workers = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGKILL)  # no clean-up of any kind
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Workers die with their launcher instead of running on as orphans.
    gone, alive = psutil.wait_procs(workers, timeout=15)
    assert not [p for p in alive if "spawn_main" in " ".join(p.cmdline())]

    with RunStore(store) as s:
        assert len(s.list_runs(status="running")) == 1
    resumed = subprocess.run(
        [*cmd, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "already" in resumed.stderr
    with RunStore(store) as s:
        (sweep,) = s.list_sweeps()
        runs = s.sweep_runs(sweep.sweep_id)
    completed = sorted((r.sweep_item, r.repeat_index) for r in runs if r.status == "completed")
    assert completed == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert [r.status for r in runs].count("failed") == 1
    assert not [r for r in runs if r.status == "running"]


def test_cpu_parallel_recipe_without_tweets_skips_only_the_text_points(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    data = write_random_mnist(tmp_path / "data", 64, 16)  # MNIST here, no tweets.csv
    argv = ["sweep", "--recipe", "cpu-parallel", "--quick", "--dry-run", "--data-dir", str(data)]
    assert run_cli([*argv, "--store", str(tmp_path / "s.db")]) == 0
    captured = capsys.readouterr()
    planned = [line for line in captured.out.splitlines() if line.strip()[:1].isdigit()]
    assert planned and all("cnn" in line for line in planned)  # 4 or 8 runs by core count
    said = " ".join((captured.out + captured.err).split())  # the console wraps long lines
    # One line for the text points, naming them and why: no tweet file here.
    skipped = [line for line in captured.err.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 1, captured.err
    assert "configuration(s) of the sweep (text affinity set 1 core(s)" in said
    assert "): no tweet file found in " in said
    assert "--data synthetic" in said


def test_recipe_workload_options_are_applied_and_shown_by_a_dry_run(tmp_path, capsys):
    argv = ["sweep", "--recipe", "cpu-parallel", "--quick", "--dry-run", "--data", "synthetic"]
    argv += ["-o", "max_len=32", "--store", str(tmp_path / "s.db")]
    assert run_cli(argv) == 0
    planned = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    text = [line for line in planned if "text affinity set" in line]
    cnn = [line for line in planned if "cnn" in line]
    assert text and all(line.endswith("  -o max_len=32") for line in text)
    # mnist-cnn has no max_len: the option goes only where a workload declares it.
    assert cnn and not any("-o" in line for line in cnn)


def test_a_recipe_workload_option_no_workload_has_is_one_line(tmp_path, capsys):
    argv = ["sweep", "--recipe", "scaling", "--dry-run", "-o", "colour=red"]
    assert run_cli([*argv, "--store", str(tmp_path / "s.db")]) == 2
    line = one_error_line(capsys)
    assert line.startswith("trainscale: error: -o colour: no workload of sweep 'scaling'")
    assert "valid -o options: none" in line


def test_recipes_say_whether_they_measure_accuracy_and_how_long(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert run_cli(["recipes"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│ ")}
    assert "no: throughput only" in rows["scaling"]  # synthetic data
    assert "no: throughput only" in rows["cpu-parallel"]  # evaluation off
    assert " yes " in rows["distributed-accuracy"] and " yes " in rows["platforms"]
    for name in ("scaling", "cpu-parallel", "distributed-accuracy", "platforms"):
        assert re.search(r"\d+ runs, about [\d.]+ (s|min|h) \(\d+ runs, about", rows[name])
    assert "rough estimate" in out and "docs/workloads.md" in out


def test_recipes_say_what_data_each_needs_and_what_is_missing_here(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    # MNIST here, no tweets.csv.
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(write_random_mnist(tmp_path / "d", 64, 16)))
    assert run_cli(["recipes"]) == 0
    out = capsys.readouterr().out
    said = " ".join(out.split())
    assert "data it needs (here?)" in said
    assert "mnist-cnn: here" in said
    assert "tweets-text: MISSING here" in said
    assert "none (synthetic data)" in said  # scaling: synthetic CIFAR-10
    missing = [line for line in out.splitlines() if line.startswith("cpu-parallel: ")]
    assert len(missing) == 1
    assert "tweets-text's" in missing[0] and "runs are skipped: no tweet file found" in missing[0]

    # --json says the same, as data.
    assert run_cli(["recipes", "--json"]) == 0
    recipes = {recipe["name"]: recipe for recipe in json.loads(capsys.readouterr().out)}
    assert list(recipes) == list(RECIPES)
    status = {need["workload"]: need["status"] for need in recipes["cpu-parallel"]["data"]}
    assert status["tweets-text"] == "missing" and status["mnist-cnn"] == "here"
    assert recipes["scaling"]["data"] == [] and not recipes["scaling"]["measures_accuracy"]
    assert recipes["platforms"]["measures_accuracy"]
    for recipe in recipes.values():
        assert 0 < recipe["quick_runs"] <= recipe["runs"]
        assert 0 < recipe["quick_estimated_s"] <= recipe["estimated_s"]
