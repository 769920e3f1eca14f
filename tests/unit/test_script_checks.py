"""A script run's checks before it starts (one line, nothing stored) and the script run
in-process as a worker runs it: as `__main__` with its own argv, its errors as one line."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError, WorkloadError
from trainscale.runner.script_exec import run_script
from trainscale.runner.script_launch import check_script, is_script, prepare_script

STEPS = """\
import sys, trainscale
meter = trainscale.meter()
assert __name__ == "__main__"
for _ in range(3):
    with meter.step(samples=len(sys.argv)):
        pass
"""


def _write(tmp_path: Path, text: str, name: str = "train.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_missing_or_broken_script_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^script nope\.py not found$"):
        check_script("nope.py")
    with pytest.raises(ConfigError, match="is not a file"):
        check_script(str(tmp_path))
    broken = _write(tmp_path, "x = 1\ndef f(:\n    pass\n")
    with pytest.raises(ConfigError, match=r"train\.py line 2: syntax error"):
        check_script(broken)


def test_the_script_is_stored_by_path_digest_and_arguments(tmp_path: Path) -> None:
    script = _write(tmp_path, STEPS)
    run = prepare_script(script, ["--epochs", "1"], RunOptions.of(script, workers=1, tag="t"))
    assert run.workload == "script:train.py"
    flat = run.flat()
    assert flat["script"] == str(Path(script).resolve())
    assert flat["script_sha256"] == hashlib.sha256(STEPS.encode()).hexdigest()
    assert (flat["script_args"], flat["workers"], flat["tag"]) == (["--epochs", "1"], 1, "t")


def test_a_script_is_told_from_a_custom_workload_file(tmp_path: Path) -> None:
    script = _write(tmp_path, STEPS)
    workload = _write(
        tmp_path, "import trainscale\ndef make_workload():\n    trainscale.meter()\n", "w.py"
    )
    plain = _write(tmp_path, "value = 1\n", "plain.py")
    assert is_script(script)  # calls trainscale.meter(), defines no make_workload
    assert not is_script(workload)  # FILE.py means FILE.py:make_workload
    assert not is_script(plain)  # left to the workload loader's one-line errors
    assert is_script(plain, separated=True)  # `trainscale run plain.py -- ...`
    assert not is_script(f"{script}:main") and not is_script("mnist-cnn")
    assert not is_script(str(tmp_path / "missing.py"))


@pytest.mark.parametrize(
    ("flat", "flag"), [({"epochs": 2.0}, "--epochs"), ({"batch_size": 32}, "--batch-size")]
)
def test_options_a_script_decides_are_refused(tmp_path: Path, flat: dict, flag: str) -> None:
    script = _write(tmp_path, STEPS)
    with pytest.raises(ConfigError, match=f"^{flag} does not apply to a script run"):
        prepare_script(script, [], RunOptions.of(script, **flat))


def test_the_data_kind_is_the_users_word(tmp_path: Path) -> None:
    script = _write(tmp_path, STEPS)
    assert prepare_script(script, [], RunOptions.of(script)).data_kind == "real"
    generated = prepare_script(script, [], RunOptions.of(script, data="synthetic"))
    assert generated.data_kind == "synthetic" and generated.flat()["data"] == "synthetic"


def test_the_script_runs_as_main_with_its_own_argv(tmp_path: Path) -> None:
    argv = list(sys.argv)
    measured = run_script(_write(tmp_path, STEPS), ["a", "b"])
    assert measured.samples == [3, 3, 3]  # len([script, "a", "b"])
    assert sys.argv == argv


def test_an_exit_0_at_the_end_is_a_normal_end(tmp_path: Path) -> None:
    assert len(run_script(_write(tmp_path, STEPS + "sys.exit(0)\n"), []).samples) == 3


def test_an_error_names_the_line_of_the_script(tmp_path: Path) -> None:
    script = _write(tmp_path, STEPS + "def main():\n    raise ValueError('boom')\nmain()\n")
    with pytest.raises(WorkloadError) as raised:
        run_script(script, [])
    assert str(raised.value) == ("script train.py: ValueError: boom (train.py line 8, in main)")


def test_bad_arguments_are_the_scripts_own_argparse_line(tmp_path: Path) -> None:
    script = _write(
        tmp_path, "import argparse\nargparse.ArgumentParser(prog='train.py').parse_args()\n"
    )
    with pytest.raises(WorkloadError) as raised:
        run_script(script, ["--bogus"])
    assert str(raised.value) == (
        "script train.py exited with status 2: train.py: error: unrecognized arguments: --bogus"
    )


def test_a_keyboard_interrupt_the_script_raises_names_its_line(tmp_path: Path) -> None:
    script = _write(tmp_path, STEPS + "raise KeyboardInterrupt\n")
    with pytest.raises(WorkloadError) as raised:
        run_script(script, [])
    assert str(raised.value) == "script train.py: KeyboardInterrupt (train.py line 7, in <module>)"


def test_an_exit_with_a_message_is_that_message(tmp_path: Path) -> None:
    said = "import sys\nprint('loading data...', file=sys.stderr)\n"
    script = _write(tmp_path, said + "sys.exit('fatal: dataset /data/train.csv is empty')\n")
    with pytest.raises(WorkloadError) as raised:
        run_script(script, [])
    assert str(raised.value) == (
        "script train.py exited with status 1: fatal: dataset /data/train.csv is empty"
    )


def test_the_script_imports_the_modules_beside_it_as_python_would(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "beside_the_script.py").write_text("SAMPLES = 7\n")
    script = _write(project, STEPS.replace("len(sys.argv)", "SAMPLES") + "", "train.py")
    script_text = "from beside_the_script import SAMPLES\n" + Path(script).read_text()
    Path(script).write_text(script_text)
    path = list(sys.path)
    assert run_script(script, []).samples == [7, 7, 7]
    assert sys.path == path  # as it was, once the script has run
    sys.modules.pop("beside_the_script", None)


def test_a_script_that_times_no_step_fails(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"^the script ran \d+\.\d s and timed no step"):
        run_script(_write(tmp_path, "import trainscale\ntrainscale.meter()\n"), [])
