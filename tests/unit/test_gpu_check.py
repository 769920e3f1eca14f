"""The GPU check's driver (benchmarks/gpu_check.py): what it records when a step ends, fails
or runs out of time. Runs on any machine: the steps here are plain commands."""

from __future__ import annotations

import importlib.util
import json
import sys
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def python_step(gpu_check, code: str, cap_s: int = 30):
    return gpu_check.Step("test", "step", cap_s, [sys.executable, "-c", code])


def test_a_step_past_its_cap_is_recorded_timed_out(gpu_check, tmp_path):
    record = gpu_check.run_step(
        python_step(gpu_check, "import time; time.sleep(30)"), tmp_path, 0.5
    )
    assert record["timed_out"] and record["rc"] is None
    assert record["seconds"] < 10


def test_a_step_past_its_cap_is_interrupted_first_so_it_can_report(gpu_check, tmp_path):
    # pytest prints its summary (the failures by name) when interrupted: that must come back.
    code = "import time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    print('summary')"
    record = gpu_check.run_step(python_step(gpu_check, code), tmp_path, 0.5)
    assert record["timed_out"] and record["out_tail"] == ["summary"]


def test_a_step_that_ignores_the_interrupt_is_killed_after_the_grace(gpu_check, tmp_path):
    code = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(30)"
    record = gpu_check.run_step(python_step(gpu_check, code), tmp_path, 0.5, grace_s=0.5)
    assert record["timed_out"] and record["seconds"] < 10


def test_the_interrupt_reaches_what_the_step_started(gpu_check, tmp_path):
    # A benchmark's own trainscale runs must hear it too, to store themselves interrupted.
    child = "import time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    print('child')"
    code = (
        "import subprocess, sys\n"
        f"proc = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
        "try:\n    proc.wait()\nexcept KeyboardInterrupt:\n    proc.wait()"
    )
    record = gpu_check.run_step(python_step(gpu_check, code), tmp_path, 1.0)
    assert record["timed_out"] and record["out_tail"] == ["child"]


def test_a_failed_step_keeps_its_error_and_a_json_answer_is_parsed(gpu_check, tmp_path):
    code = "import json, sys; print('progress'); print(json.dumps({'a': 1})); sys.exit('boom')"
    record = gpu_check.run_step(python_step(gpu_check, code), tmp_path, 30)
    assert record["rc"] == 1 and not record["timed_out"]
    assert record["err_tail"] == ["boom"]
    assert record["json"] == {"a": 1}


def test_a_multi_line_json_answer_is_parsed_whole(gpu_check):
    assert gpu_check.last_json(json.dumps({"a": {"b": 2}}, indent=2)) == {"a": {"b": 2}}
    assert gpu_check.last_json("no answer") is None


def test_the_plan_puts_the_timed_steps_before_the_tests(gpu_check, tmp_path):
    names = [s.name for s in gpu_check.plan(tmp_path, tmp_path / "mnist", tmp_path / "steps")]
    assert names[:3] == ["nvidia_smi", "env", "probe"]
    assert names.index("mnist_time_to_99") < names.index("tests_gpu")
    assert names.index("resnet_throughput") < names.index("tests_gpu")
    assert {f"cuda_{w}" for w in gpu_check.WORKLOADS} <= set(names)
    without_mnist = [s.name for s in gpu_check.plan(tmp_path, None, tmp_path / "steps")]
    assert "mnist_time_to_99" not in without_mnist and "mnist_profile" not in without_mnist
    # The profiled run after the timed ones; its files land where the tar collects them.
    assert names.index("mnist_time_to_99") < names.index("mnist_profile")
    (profiled,) = [
        s
        for s in gpu_check.plan(tmp_path, tmp_path, tmp_path / "steps")
        if s.name == "mnist_profile"
    ]
    at = profiled.argv.index("--profile")
    assert profiled.argv[at + 1] == str(tmp_path / "steps")
    # The held-out simulator check sees the workloads' short GPU runs, not the study's.
    assert names.index("cuda_imdb-bigru") < names.index("simulator_one_device")
    assert "platforms_gpu" not in names  # no IMDB given


def test_the_platform_studys_gpu_rows_need_both_datasets_in_one_folder(gpu_check, tmp_path):
    steps = gpu_check.plan(tmp_path, tmp_path / "mnist", tmp_path / "steps", tmp_path / "imdb")
    names = [s.name for s in steps]
    assert names[-1] == "platforms_gpu"
    study = steps[-1]
    assert study.argv[:2] == ["env", f"TRAINSCALE_DATA_DIR={tmp_path}"]
    assert "benchmarks/platforms_gpu.toml" in study.argv


def test_every_step_s_files_come_back_in_one_tar_as_each_step_ends(gpu_check, tmp_path):
    # The machine that runs the check returns a handful of files: the steps' outputs travel
    # in one tar, written as each step ends, beside results.jsonl.
    out, steps_dir = tmp_path / "out", tmp_path / "steps"
    out.mkdir()
    steps_dir.mkdir()
    steps = [
        gpu_check.Step("a", "first", 30, [sys.executable, "-c", "print('one')"]),
        gpu_check.Step("b", "second", 30, [sys.executable, "-c", "import sys; sys.exit('two')"]),
    ]
    gpu_check.run_all(steps, out, steps_dir, budget_s=120)
    assert sorted(p.name for p in out.iterdir()) == ["results.jsonl", "steps.tar"]
    with tarfile.open(out / "steps.tar") as tar:
        names = sorted(tar.getnames())
        second_err = tar.extractfile("steps/second.err").read().decode()
    assert names == [f"steps/{n}" for n in ("first.err", "first.out", "second.err", "second.out")]
    assert second_err.strip() == "two"
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["name"], r["rc"]) for r in records] == [("first", 0), ("second", 1)]


def test_steps_past_the_budget_are_recorded_skipped(gpu_check, tmp_path):
    steps = [gpu_check.Step("a", "late", 30, [sys.executable, "-c", "print(1)"])]
    gpu_check.run_all(steps, tmp_path, tmp_path, budget_s=5)
    record = json.loads((tmp_path / "results.jsonl").read_text())
    assert record == {"name": "late", "skipped": "budget spent"}
