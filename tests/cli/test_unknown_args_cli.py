"""An option no command takes is said by the command it was given to, with the option it
most resembles: a typo costs one line that names the fix, not a look through `--help`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import one_error_line, run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["run", "mnist-cnn", "--wokers", "2"],
            "trainscale run: error: unrecognized arguments: --wokers 2; did you mean --workers?"
            " (see `trainscale run --help`)",
        ),
        (
            ["runs", "list", "--limt", "3"],
            "trainscale runs list: error: unrecognized arguments: --limt 3; did you mean --limit?"
            " (see `trainscale runs list --help`)",
        ),
        (
            ["simulate", "mnist-cnn", "--cluster=local", "--wrkers=1,2"],
            "trainscale simulate: error: unrecognized arguments: --wrkers=1,2; did you mean"
            " --workers? (see `trainscale simulate --help`)",
        ),
    ],
)
def test_a_mistyped_option_is_named_with_its_likely_spelling(capsys, args, said):
    assert run_cli(args) == 2
    assert one_error_line(capsys) == said


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["simulate", "mnist-cnn", "--workers", "1", "2", "4"], "--workers 1,2,4"),
        (["emulate", "mnist-cnn", "--mode", "sync", "--workers", "1", "2"], "--workers 1,2"),
        (["probe", "--only", "matmul", "dispatch", "--quick"], "--only matmul,dispatch"),
        (["probe", "--precisions", "fp32", "bf16"], "--precisions fp32,bf16"),
        (["recommend", "mnist-cnn", "--rung-steps", "3", "4"], "--rung-steps 3,4"),
    ],
)
def test_a_list_given_with_spaces_is_shown_with_commas(capsys, args, fix):
    assert run_cli(args) == 2
    line = one_error_line(capsys)
    assert f"; {fix.split()[0]} takes one comma-separated list: {fix} (see" in line


def test_a_value_after_an_option_of_one_value_is_not_taken_for_a_list(capsys):
    assert run_cli(["run", "mnist-cnn", "--workers", "2", "3"]) == 2
    assert "comma-separated" not in one_error_line(capsys)


def test_each_of_several_mistyped_options_gets_its_own_suggestion(capsys):
    assert run_cli(["run", "mnist-cnn", "--wokers", "2", "--epohcs", "1"]) == 2
    line = one_error_line(capsys)
    assert "did you mean --workers for --wokers, --epochs for --epohcs?" in line


def test_an_option_of_another_command_names_that_command_not_a_lookalike(capsys):
    # The bench picks its own settings: --workers is no typo of its --workload.
    assert run_cli(["bench", "--quick", "--workers=2"]) == 2
    assert one_error_line(capsys) == (
        "trainscale bench: error: unrecognized arguments: --workers=2; --workers is an option"
        " of `trainscale run`, `trainscale probe`, `trainscale emulate`, ..."
        " (see `trainscale bench --help`)"
    )
    assert run_cli(["runs", "list", "--rounds=3"]) == 2
    assert "; --rounds is an option of `trainscale bench` (see" in one_error_line(capsys)


def test_an_argument_like_no_option_is_named_without_a_guess(capsys):
    assert run_cli(["report", "--tag", "x", "--out", "o", "--zzzz"]) == 2
    assert one_error_line(capsys) == (
        "trainscale report: error: unrecognized arguments: --zzzz (see `trainscale report --help`)"
    )


def test_arguments_after_a_script_are_pointed_after_the_separator(capsys):
    assert run_cli(["bench", str(EXAMPLES / "mnist_script.py"), "--lr", "3"]) == 2
    assert "a script's own arguments go after `--`" in one_error_line(capsys)


def test_a_workload_file_is_not_taken_for_a_script(capsys):
    workload = EXAMPLES / "custom_workload" / "my_workload.py"
    assert run_cli(["bench", str(workload), "--lr", "3"]) == 2
    assert "after `--`" not in one_error_line(capsys)
