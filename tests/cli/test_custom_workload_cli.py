"""Custom workloads from the command line: the shipped example serially and with 2 gloo
workers, in every command, and broken user files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.custom_workloads import (
    BROKEN,
    EXAMPLE,
    EXAMPLE_REF,
    fresh_custom_workloads,
    tiny_workload,
)

pytestmark = pytest.mark.usefixtures("fresh_custom_workloads")
__all__ = ["fresh_custom_workloads"]

FEW_STEPS = ["--steps", "150", "--quiet", "--json"]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))


def _run(capsys, store_path: Path, *args: str) -> dict:
    code = run_cli(["run", *args, "--store", str(store_path), *FEW_STEPS])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_example_trains_on_its_arrays_and_is_stored_by_name(capsys, store_path, workers):
    result = _run(capsys, store_path, EXAMPLE_REF, "--workers", str(workers))
    assert result["workload"] == "spiral-mlp" and result["status"] == "completed"
    assert result["world_size"] == workers and result["data"] == "real"
    # 150 steps of the five-arm spiral get well past chance (0.2).
    assert result["test_accuracy"] > 0.5
    with RunStore(store_path) as store:
        record = store.get_run(result["run_id"])
    assert record.config["workload_source"] == f"{EXAMPLE}:make_workload"
    assert record.config["workload"] == "spiral-mlp"


def test_a_relative_reference_works_from_its_directory(capsys, store_path, tmp_path):
    tiny_workload(tmp_path, "rel-tiny")
    result = _run(capsys, store_path, "rel_tiny_workload.py", "--workers", "2")
    assert result["workload"] == "rel-tiny" and result["world_size"] == 2


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_file_is_one_line_and_nothing_is_stored(capsys, store_path, tmp_path, kind):
    text, expected = BROKEN[kind]
    (tmp_path / "broken.py").write_text(text)
    code = run_cli(["run", "broken.py", "--store", str(store_path)])
    assert code == 2
    assert one_error_line(capsys).startswith(f"trainscale: error: {expected}")
    assert not store_path.exists()


def test_a_model_that_raises_fails_the_run_stored_with_the_file_and_line(
    capsys, store_path, tmp_path
):
    path = tiny_workload(tmp_path, "raising", forward="return self.fc(x[:, :3])")
    code = run_cli(["run", str(path), "--steps", "5", "--store", str(store_path)])
    assert code == 1
    err = capsys.readouterr().err
    line = path.read_text().splitlines().index("        return self.fc(x[:, :3])") + 1
    reason = (
        "workload raising_workload.py:make_workload: RuntimeError: mat1 and mat2 shapes cannot "
        f"be multiplied (32x3 and 4x2) (raising_workload.py line {line}, in forward)"
    )
    assert reason in err
    with RunStore(store_path) as store:
        (record,) = store.list_runs()
    assert record.status == "failed" and reason in record.error


def test_a_framework_the_workload_names_no_model_for_is_refused(capsys, store_path):
    code = run_cli(["run", EXAMPLE_REF, "--framework", "jax", "--store", str(store_path)])
    assert code == 2
    assert one_error_line(capsys) == (
        "trainscale: error: workload 'spiral-mlp' has no jax model, only pytorch "
        "(docs/frameworks.md)"
    )


def test_report_and_simulate_take_the_custom_workload(capsys, store_path, tmp_path):
    one = _run(capsys, store_path, EXAMPLE_REF)
    two = _run(capsys, store_path, EXAMPLE_REF, "--workers", "2")
    out = tmp_path / "report"
    assert (
        run_cli(
            [
                "report",
                "--runs",
                one["run_id"],
                two["run_id"],
                "--out",
                str(out),
                "--store",
                str(store_path),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert "spiral-mlp" in (out / "report.md").read_text()
    assert (out / "accuracy-spiral-mlp.png").stat().st_size > 0
    code = run_cli(
        [
            "simulate",
            EXAMPLE_REF,
            "--cluster",
            "cpu-25gbe",
            "--workers",
            "1,2,4",
            "--store",
            str(store_path),
            "--json",
        ]
    )
    assert code == 0
    prediction = json.loads(capsys.readouterr().out)
    assert prediction["workload"] == "spiral-mlp"
    assert [row["workers"] for row in prediction["predictions"]] == [1, 2, 4]


def test_sweep_and_emulate_take_the_custom_workload(capsys, store_path, tmp_path):
    # (bench takes it too: the example notebook's bench runs it, tests/notebooks.)
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(
        f'[base]\nworkload = "{EXAMPLE_REF}"\ndata = "synthetic"\nsteps = 6\n\n'
        "[grid]\nworkers = [1, 2]\n"
    )
    assert run_cli(["sweep", str(sweep_file), "--store", str(store_path)]) == 0
    code = run_cli(
        ["emulate", EXAMPLE_REF, "--workers", "1,2", "--mode", "sync", "--steps", "6",
         "--store", str(store_path)]
    )  # fmt: skip
    assert code == 0
    capsys.readouterr()
    with RunStore(store_path) as store:
        runs = store.list_runs()
    assert {run.workload for run in runs} == {"spiral-mlp"}
    assert len(runs) == 4 and all(run.status == "completed" for run in runs)


def test_workloads_describes_a_custom_reference(capsys):
    assert run_cli(["workloads", EXAMPLE_REF, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["name"] == "spiral-mlp" and row["source"] == f"{EXAMPLE}:make_workload"
    assert row["frameworks"] == ["pytorch"]


def test_runs_are_selected_by_the_custom_workloads_reference(capsys, store_path):
    result = _run(capsys, store_path, EXAMPLE_REF, "--data", "synthetic")
    code = run_cli(["runs", "list", "--workload", EXAMPLE_REF, "--store", str(store_path)])
    assert code == 0
    assert result["run_id"][:8] in capsys.readouterr().out


def test_workloads_of_a_training_script_says_how_to_run_it_and_does_not_run_it(capsys, tmp_path):
    script = tmp_path / "train.py"
    ran = tmp_path / "ran"
    script.write_text(
        f"import pathlib, trainscale\npathlib.Path({str(ran)!r}).touch()\n"
        "meter = trainscale.meter()\n"
    )
    assert run_cli(["workloads", str(script)]) == 2
    line = one_error_line(capsys)
    assert "is a training script" in line and "trainscale run" in line and " -- " in line
    assert not ran.exists()  # loading it as a workload file would have run it
