"""`trainscale report` through the real entry point: the files, and one-line errors."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from trainscale.cli import main
from trainscale.results.store import RunStore

from tests.helpers.report_store import build_store, cpu_parallel_configs, run_id

SWEEP = "5eed0000"


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Keep a developer's $TRAINSCALE_STORE from leaking into the tests.
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    path = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    with RunStore(path) as store:
        store.create_sweep("e0e0e0e0ffff", "empty", "tests", "h", {"name": "empty"}, [])
        store.create_sweep("fa11fa11ffff", "all-failed", "tests", "h2", {"name": "x"}, [])
        store.create_run(
            "f0000000dead",
            "mnist-cnn",
            {},
            {},
            data_kind="real",
            world_size=1,
            threads_per_worker=1,
            affinity="compact",
            precision="fp32",
            global_batch_size=64,
            sweep_id="fa11fa11ffff",
            sweep_item=0,
            repeat_index=0,
        )
        store.fail_run("f0000000dead", "DataError: MNIST files not found")
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_report_of_a_sweep(store_path: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    code, stdout, stderr = _run(
        capsys, "report", "--sweep", SWEEP, "--out", str(out), "--store", str(store_path)
    )
    assert code == 0, stderr
    assert str(out / "report.html") in stdout
    assert "6 configuration(s)" in stdout and "1 run(s) not completed" in stdout
    # tweets-text's synthetic runs have no accuracy plot; its 1- and 2-core settings are
    # plotted against cores (one worker each: there was no plot against workers).
    assert "plot not drawn: accuracy (tweets-text)" in stdout
    assert "plot not drawn: throughput (tweets-text)" not in stdout
    names = ("report.html", "report.md", "report.csv", "speedup-mnist-cnn.png")
    for name in (*names, "throughput-tweets-text.png"):
        assert (out / name).is_file(), name


def test_report_json_is_the_report_as_one_object(store_path: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    code, stdout, stderr = _run(
        capsys,
        "report",
        "--sweep",
        SWEEP,
        "--out",
        str(out),
        "--store",
        str(store_path),
        "--json",
    )
    assert code == 0, stderr
    document = json.loads(stdout)  # stdout is the JSON alone; the summary went to stderr
    assert "6 configuration(s)" in stderr and str(out / "report.html") in stderr
    assert document["html"] == str(out / "report.html")
    assert all(Path(plot).is_file() for plot in document["plots"])
    assert "accuracy (tweets-text): " in " ".join(document["not_drawn"])
    with (out / "report.csv").open(encoding="utf-8") as table:
        rows = list(csv.DictReader(table))
    assert [c["configuration"] for c in document["configurations"]] == [
        row["configuration"] for row in rows
    ]
    assert [c["run_ids"] for c in document["configurations"]] == [r["run_ids"] for r in rows]
    assert document["runs_completed"] == sum(int(row["runs"]) for row in rows)
    by_workload = {w["workload"]: w for w in document["workloads"]}
    assert set(by_workload) == {row["workload"] for row in rows}
    mnist = by_workload["mnist-cnn"]
    assert mnist["baseline"] in {row["configuration"] for row in rows}
    assert 0 <= mnist["amdahl"]["serial_fraction"] <= 1 and mnist["amdahl"]["num_points"] > 0
    (failed,) = document["not_completed"]
    assert failed["run_id"] == run_id(2, 2) and failed["reason"]


def test_report_of_runs_with_baseline(store_path: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    code, stdout, stderr = _run(
        capsys,
        "report",
        "--runs",
        run_id(0, 0)[:6],
        run_id(2, 0),
        run_id(2, 1),
        "--baseline",
        run_id(2, 0)[:6],
        "--out",
        str(out),
        "--store",
        str(store_path),
    )
    assert code == 0, stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "chosen with --baseline" in page
    assert "<td>workers=4 (baseline)</td>" in page  # only the worker count differs


def test_report_of_the_runs_of_a_tag_pairs_them_by_round(
    store_path: Path, tmp_path: Path, capsys
) -> None:
    # A bench's runs: two settings in three rounds, stored with the bench's tag.
    tagged = [run_id(config, repeat) for config in (0, 2) for repeat in range(3)]
    with sqlite3.connect(store_path) as conn:
        conn.executemany(
            "UPDATE runs SET tag = 'bench:0b0b' WHERE run_id = ?", [(r,) for r in tagged]
        )
    out = tmp_path / "report"
    code, stdout, stderr = _run(
        capsys, "report", "--tag", "bench:0b0b", "--out", str(out), "--store", str(store_path)
    )
    assert code == 0, stderr
    assert "report of tag bench:0b0b (6 run(s)): 2 configuration(s)" in stdout
    assert "1 run(s) not completed" in stdout  # the fixture's failed third round
    with (out / "report.csv").open(encoding="utf-8") as table:
        rows = list(csv.DictReader(table))
    assert [(row["runs"], row["failed_runs"]) for row in rows] == [("3", "0"), ("2", "1")]
    assert rows[1]["paired_speedup"]  # paired within the rounds (repeat index) they shared


def test_store_from_environment(
    store_path: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINSCALE_STORE", str(store_path))
    code, _, stderr = _run(capsys, "report", "--sweep", SWEEP, "--out", str(tmp_path / "r"))
    assert code == 0, stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep", "nosuch"], "no sweep 'nosuch'"),
        (["--sweep", "e0e0"], "has no runs yet"),
        (["--sweep", "fa11"], "no completed runs"),
        (["--runs", "nosuch"], "no run 'nosuch'"),
        # As --workers takes its list: the ids as they go.
        (["--runs", "c1,c2"], "give run ids separated by spaces, not commas (c1 c2)"),
        (["--runs", "c"], "matches"),  # every fixture run id starts with 'c'
        (["--runs", run_id(2, 2)], "no completed runs"),  # the failed run alone
        (["--runs", "  "], "no run ids given"),
        (["--tag", "bench:nosuch"], "no runs with tag 'bench:nosuch' in "),
        (["--tag", " "], "empty tag"),
        (["--sweep", SWEEP, "--baseline", "fastest"], "neither a configuration label"),
    ],
)
def test_bad_input_is_one_line(
    store_path: Path, tmp_path: Path, capsys, args: list[str], message: str
) -> None:
    out = tmp_path / "report"
    code, stdout, stderr = _run(
        capsys, "report", *args, "--out", str(out), "--store", str(store_path)
    )
    assert code == 2
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("trainscale: error: ")
    assert message in lines[0]
    assert not out.exists()  # nothing written for a report that could not be made


def test_missing_store_is_one_line(tmp_path: Path, capsys) -> None:
    code, _, stderr = _run(
        capsys,
        "report",
        "--sweep",
        SWEEP,
        "--out",
        str(tmp_path / "r"),
        "--store",
        str(tmp_path / "missing.db"),
    )
    assert code == 2
    assert stderr.count("\n") == 1 and "no results store" in stderr
    assert not (tmp_path / "missing.db").exists()  # reading never creates a store


def test_unwritable_out_dir_is_one_line(store_path: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for out in (blocker, blocker / "sub"):
        code, _, stderr = _run(
            capsys, "report", "--sweep", SWEEP, "--out", str(out), "--store", str(store_path)
        )
        assert code == 2
        assert stderr.count("\n") == 1 and "trainscale: error: cannot" in stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--out", "x"],  # neither --sweep nor --runs
        ["--sweep", SWEEP],  # no --out
        ["--sweep", SWEEP, "--runs", "a", "--out", "x"],  # both
        ["--runs", "--out", "x"],  # --runs without ids
    ],
)
def test_usage_errors_are_one_line(args: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["report", *args])
    assert exit_info.value.code == 2
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and "error:" in stderr
