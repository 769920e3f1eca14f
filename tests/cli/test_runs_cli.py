"""`trainscale runs list|show|export` through the real entry point."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainscale.cli import main
from trainscale.results.store import RunStore

from tests.helpers.stored_runs import add_run

SUMMARY = {
    "samples_per_s": 1234.5,
    "step_time_s_median": 0.05,
    "step_time_s_p90": 0.06,
    "epoch_time_s": 10.0,
    "time_to_target_s": 17.25,
    "target_accuracy": 0.99,
    "test_accuracy": 0.9912,
    "test_loss": 0.03,
    "peak_memory_bytes_per_worker": [2**20, 2**21],
}


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store with a completed, a failed and a running (synthetic) run."""
    # Keep a developer's $TRAINSCALE_STORE from leaking into the tests.
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    path = tmp_path / "runs.db"
    common = {"world_size": 2, "threads_per_worker": 1, "affinity": "compact"}
    with RunStore(path) as store:
        store.create_run(
            "aaaa1111completed",
            "mnist_cnn",
            {"lr": 0.1, "optimizer": {"name": "sgd", "momentum": 0.9}},
            {"cpu_model": "Test CPU [v2]", "torch_version": "2.13.0"},
            data_kind="real",
            precision="fp32",
            global_batch_size=128,
            tag="sweep",
            **common,
        )
        store.complete_run(
            "aaaa1111completed",
            SUMMARY,
            [
                {"epoch": 1, "train_loss": 0.4, "test_accuracy": 0.98, "epoch_time_s": 10.0},
                {"epoch": 2, "train_loss": 0.2, "test_accuracy": 0.9912, "epoch_time_s": 9.5},
            ],
            [0.05, 0.06],
        )
        store.create_run(
            "bbbb2222failed",
            "resnet44",
            {},
            {},
            data_kind="real",
            precision="bf16",
            global_batch_size=256,
            **common,
        )
        store.fail_run("bbbb2222failed", "RuntimeError: shapes [3, 4] and [5] differ")
        store.create_run(
            "aaab3333running",
            "mnist_cnn",
            {},
            {},
            data_kind="synthetic",
            precision="fp32",
            global_batch_size=64,
            **common,
        )
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "runs", "list", "--store", str(store_path))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert "run" in lines[0] and "samples/s" in lines[0]
    body = "\n".join(lines[1:])
    # Short ids, newest first.
    assert [line.split()[0] for line in lines[1:]] == ["aaab3333", "bbbb2222", "aaaa1111"]
    assert "1234.5" in body and "0.9912" in body and "17.2" in body
    assert "2 x 1" in body
    # A failed run's row says why, in short (`runs show` has the whole reason).
    (failed,) = [line for line in lines if line.startswith("bbbb2222")]
    assert failed.endswith("RuntimeError: shapes [3, 4] and [5] differ")
    # Piped output stays plain: no colour codes, no trailing padding.
    assert "\x1b[" not in out
    assert all(line == line.rstrip() for line in lines)


def test_list_says_which_device_a_run_trained_on(tmp_path: Path, capsys) -> None:
    # One process of 16 host threads, on the CPU or driving a GPU: only the device tells.
    store = tmp_path / "runs.db"
    with RunStore(store) as opened:
        add_run(opened, "c0de00000001", config={"device": "cpu"}, threads_per_worker=16)
        add_run(opened, "90de00000001", config={"device": "cuda"}, threads_per_worker=16)
        add_run(opened, "01de00000001", config={})  # stored before the device was recorded
    code, out, _ = _run(capsys, "runs", "list", "--store", str(store))
    assert code == 0
    header, *rows = out.splitlines()
    column = header.split().index("device")
    devices = {row.split()[0]: row.split()[column] for row in rows}
    assert devices == {"c0de0000": "cpu", "90de0000": "cuda", "01de0000": "cpu"}


def test_list_names_the_host_where_runs_come_from_several(tmp_path: Path, capsys) -> None:
    store = tmp_path / "runs.db"
    with RunStore(store) as opened:
        add_run(opened, "1a9100000001", env={"hostname": "laptop"})
    code, out, _ = _run(capsys, "runs", "list", "--store", str(store))
    assert code == 0 and "host" not in out.splitlines()[0].split()  # one machine: no column
    with RunStore(store) as opened:  # as `runs import` brings another machine's runs
        add_run(opened, "90de00000001", env={"hostname": "gpu-server"})
    code, out, _ = _run(capsys, "runs", "list", "--store", str(store))
    header, *rows = out.splitlines()
    column = header.split().index("host")
    assert header.split()[column - 1] == "device"
    assert {row.split()[0]: row.split()[column] for row in rows} == {
        "1a910000": "laptop",
        "90de0000": "gpu-server",
    }


def test_list_filters_and_limit(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = ["--store", str(store_path)]
    _, out, _ = _run(capsys, "runs", "list", "--workload", "resnet44", *store)
    assert "bbbb2222" in out and "aaaa1111" not in out
    _, out, _ = _run(capsys, "runs", "list", "--status", "completed", *store)
    assert "aaaa1111" in out and "bbbb2222" not in out
    _, out, _ = _run(capsys, "runs", "list", "--tag", "sweep", *store)
    assert len(out.splitlines()) == 2
    _, out, _ = _run(capsys, "runs", "list", "--limit", "1", *store)
    assert len(out.splitlines()) == 2 and "aaab3333" in out
    code, out, _ = _run(capsys, "runs", "list", "--tag", "nothing", *store)
    assert code == 0 and "no runs" in out


def test_list_uses_env_store(
    store_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINSCALE_STORE", str(store_path))
    code, out, _ = _run(capsys, "runs", "list")
    assert code == 0 and "aaaa1111" in out


def test_show_completed(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "runs", "show", "aaaa", "--store", str(store_path))
    assert code == 0 and err == ""
    assert "aaaa1111completed" in out and "completed" in out
    # summary, epochs, config (nested keys flattened), environment with literal brackets
    assert "samples_per_s" in out and "1234.5" in out
    assert "1.0 MiB, 2.0 MiB" in out
    assert "train_loss" in out and "0.9912" in out
    assert "optimizer.momentum" in out and "0.9" in out
    assert "Test CPU [v2]" in out
    assert "torch_version" in out


def test_show_failed_prints_error(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "runs", "show", "bbbb", "--store", str(store_path))
    assert code == 0
    assert "failed" in out
    assert "RuntimeError: shapes [3, 4] and [5] differ" in out


def test_show_synthetic_is_labelled(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "runs", "show", "aaab", "--store", str(store_path))
    assert code == 0 and "synthetic" in out


@pytest.mark.parametrize("run_id", ["zzzz", "aaa"], ids=["unknown", "ambiguous"])
def test_show_bad_run_id(store_path: Path, capsys: pytest.CaptureFixture[str], run_id: str) -> None:
    code, out, err = _run(capsys, "runs", "show", run_id, "--store", str(store_path))
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("trainscale: error:")
    assert "Traceback" not in err


@pytest.mark.parametrize("action", [["list"], ["show", "abc"], ["export", "--format", "json"]])
def test_missing_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    missing = tmp_path / "nowhere.db"
    code, out, err = _run(capsys, "runs", *action, "--store", str(missing))
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"no results store at {missing}" in err
    assert "--store" in err
    # Reading must not create the file as a side effect.
    assert not missing.exists()


def test_export_json_stdout(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "runs", "export", "--format", "json", "--store", str(store_path))
    assert code == 0
    data = json.loads(out)
    by_id = {item["run_id"]: item for item in data}
    assert set(by_id) == {"aaaa1111completed", "bbbb2222failed", "aaab3333running"}
    done = by_id["aaaa1111completed"]
    assert done["samples_per_s"] == 1234.5
    assert done["time_to_target_s"] == 17.25
    assert done["data"] == "real"
    assert [e["epoch"] for e in done["epochs"]] == [1, 2]
    assert done["env"]["torch_version"] == "2.13.0"
    assert by_id["bbbb2222failed"]["error"].startswith("RuntimeError")
    assert by_id["aaab3333running"]["data"] == "synthetic"


def test_export_csv_stdout_with_filter(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys,
        "runs",
        "export",
        "--format",
        "csv",
        "--workload",
        "mnist_cnn",
        "--store",
        str(store_path),
    )
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["run_id"] for row in rows] == ["aaab3333running", "aaaa1111completed"]
    assert rows[1]["samples_per_s"] == "1234.5"
    assert rows[1]["torch_version"] == "2.13.0"
    # A run stored before frameworks: PyTorch, its release torch's.
    assert (rows[1]["framework"], rows[1]["framework_version"]) == ("pytorch", "2.13.0")


def test_an_export_names_each_runs_framework(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "fw.db"
    with RunStore(store_path) as store:
        config = {"workload": "mnist-cnn", "framework": "jax", "single_process": True}
        env = {"torch_version": "2.13.0", "framework": {"name": "jax", "version": "0.10.2"}}
        add_run(store, "jjjj1111", config=config, env=env, world_size=2)
    code, out, _ = _run(capsys, "runs", "export", "--format", "csv", "--store", str(store_path))
    assert code == 0
    (row,) = csv.DictReader(io.StringIO(out))
    assert (row["framework"], row["framework_version"], row["single_process"]) == (
        "jax",
        "0.10.2",
        "True",
    )
    code, out, _ = _run(capsys, "runs", "export", "--format", "json", "--store", str(store_path))
    (run,) = json.loads(out)
    assert (run["framework"], run["framework_version"], run["single_process"]) == (
        "jax",
        "0.10.2",
        True,
    )


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_export_to_file(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    target = tmp_path / f"runs.{fmt}"
    target.write_text("old content")
    code, out, _ = _run(
        capsys, "runs", "export", "--format", fmt, "--out", str(target), "--store", str(store_path)
    )
    assert code == 0
    assert "wrote 3 runs" in out
    text = target.read_text()
    if fmt == "json":
        assert len(json.loads(text)) == 3
    else:
        assert len(list(csv.DictReader(io.StringIO(text)))) == 3
    # No temporary file left beside the result.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["runs.db", target.name])


def test_export_to_missing_directory(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no" / "dir" / "runs.csv"
    code, _, err = _run(
        capsys,
        "runs",
        "export",
        "--format",
        "csv",
        "--out",
        str(target),
        "--store",
        str(store_path),
    )
    assert code == 2 and "does not exist" in err
    assert len(err.strip().splitlines()) == 1


def test_bad_limit_is_usage_error(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["runs", "list", "--limit", "0", "--store", str(store_path)])
    assert info.value.code == 2
    assert "at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("test_accuracy", "expected"),
    [(0.95, "missed"), (None, "-")],
    ids=["evaluated-below-target", "never-evaluated"],
)
def test_time_to_target_says_missed_only_for_evaluated_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], test_accuracy: float | None, expected: str
) -> None:
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        store.create_run(
            "cccc4444",
            "mnist-cnn",
            {},
            {},
            data_kind="real",
            world_size=1,
            threads_per_worker=1,
            affinity="compact",
            precision="fp32",
            global_batch_size=64,
        )
        summary = {"samples_per_s": 500.0, "target_accuracy": 0.99, "time_to_target_s": None}
        store.complete_run("cccc4444", {**summary, "test_accuracy": test_accuracy}, [], [0.1])
    code, out, _ = _run(capsys, "runs", "list", "--store", str(path))
    assert code == 0
    assert out.splitlines()[1].split()[-1] == expected


def test_list_json_is_the_json_export_of_the_same_runs(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", str(store_path)]
    for filters in ([], ["--status", "completed"], ["--workload", "nope"], ["--limit", "2"]):
        code, listed, err = _run(capsys, "runs", "list", "--json", *filters, *store)
        assert code == 0 and err == ""
        _, exported, _ = _run(capsys, "runs", "export", "--format", "json", *filters, *store)
        assert json.loads(listed) == json.loads(exported), filters
    assert [run["run_id"][:8] for run in json.loads(listed)] == ["aaab3333", "bbbb2222"]


def test_show_json_is_the_runs_exported_object(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", str(store_path)]
    code, out, err = _run(capsys, "runs", "show", "aaaa1111", "--json", *store)
    assert code == 0 and err == ""
    shown = json.loads(out)
    _, exported, _ = _run(capsys, "runs", "export", "--format", "json", "--run", "aaaa", *store)
    assert [shown] == json.loads(exported)
    assert [epoch["test_accuracy"] for epoch in shown["epochs"]] == [0.98, 0.9912]
    assert _run(capsys, "runs", "show", "zzzz", "--json", *store)[0] == 2


# -- runs sweeps ------------------------------------------------------------------------------


def test_sweeps_lists_stored_sweeps_newest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"
    common = {
        "data_kind": "synthetic",
        "world_size": 1,
        "threads_per_worker": 1,
        "affinity": "compact",
        "precision": "fp32",
        "global_batch_size": 64,
    }
    with RunStore(path) as store:
        plan = [{"label": "w1", "config_hash": "h1", "repeat": r} for r in range(3)]
        store.create_sweep("0ld0" * 8, "threads [study]", "study.toml", "s1", {}, plan)
        store.create_sweep("9ew0" * 8, "cpu-parallel", "recipe:cpu-parallel", "s2", {}, plan[:2])
        # Old sweep: repeat 0 completed twice (a resumed retry), repeat 1 failed, 2 running.
        for n, (repeat, outcome) in enumerate([(0, "ok"), (0, "ok"), (1, "fail"), (2, "run")]):
            rid = f"run{n}"
            store.create_run(
                rid,
                "mnist-cnn",
                {},
                {},
                config_hash="h1",
                sweep_id="0ld0" * 8,
                sweep_item=0,
                repeat_index=repeat,
                **common,
            )
            if outcome == "ok":
                store.complete_run(rid, {}, [], [0.1])
            elif outcome == "fail":
                store.fail_run(rid, "boom")
    code, out, err = _run(capsys, "runs", "sweeps", "--store", str(path))
    assert code == 0 and err == ""
    header, *rows = out.splitlines()
    assert header.split() == ["sweep", "created", "(UTC)", "name", "source", "runs", "done/planned"]
    assert [row.split()[0] for row in rows] == ["9ew09ew0", "0ld00ld0"]
    assert "recipe:cpu-parallel" in rows[0] and rows[0].endswith("0/2")
    assert "threads [study]" in rows[1] and "study.toml" in rows[1] and rows[1].endswith("1/3")

    code, out, _ = _run(capsys, "runs", "sweeps", "--limit", "1", "--store", str(path))
    assert code == 0 and len(out.splitlines()) == 2 and "9ew09ew0" in out

    code, out, _ = _run(capsys, "runs", "sweeps", "--json", "--store", str(path))
    newest, oldest = json.loads(out)
    assert (newest["sweep_id"], newest["completed"], newest["planned"]) == ("9ew0" * 8, 0, 2)
    assert (oldest["name"], oldest["source"], oldest["completed"]) == (
        "threads [study]",
        "study.toml",
        1,
    )
    assert oldest["plan"] == plan and oldest["spec_hash"] == "s1"


def test_sweeps_of_a_store_without_sweeps(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "runs", "sweeps", "--store", str(store_path))
    assert code == 0 and err == "" and out == f"no sweeps in {store_path}\n"


def test_sweeps_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["runs", "sweeps", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "newest first" in out and "--store" in out and "--limit" in out
    with pytest.raises(SystemExit):
        main(["runs", "--help"])
    assert "sweeps" in capsys.readouterr().out


@pytest.mark.parametrize("sweep_id", ["nosuch", " "], ids=["unknown", "empty"])
def test_unknown_sweep_points_to_the_real_command(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep_id: str
) -> None:
    code = main(
        ["report", "--sweep", sweep_id, "--out", str(tmp_path / "r"), "--store", str(store_path)]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    command = re.search(r"`trainscale ([a-z ]+)` lists the stored sweeps", err)
    assert command is not None, err
    # The command the message names exists and lists sweeps.
    assert main([*command.group(1).split(), "--store", str(store_path)]) == 0
    assert capsys.readouterr().out.startswith("no sweeps in")


def test_export_to_standard_output_by_path_keeps_the_status_line_out_of_the_data(
    store_path: Path,
) -> None:
    # A process of its own, as from a shell: its /dev/stdout is then the pipe read here.
    command = ["runs", "export", "--format", "json", "--out", "/dev/stdout"]
    done = subprocess.run(
        [sys.executable, "-m", "trainscale", *command, "--store", str(store_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) == 3  # the data alone: the status line is on stderr
    assert "wrote 3 runs to /dev/stdout" in done.stderr
