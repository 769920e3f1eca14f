"""An empty path where a command writes or reads (an unset shell variable, say) is one line
and exit 2: Path('') is '.', which the user never meant."""

from __future__ import annotations

import pytest

from tests.helpers.cli import one_error_line, run_cli


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["report", "--runs", "abc", "--out", ""], "--out"),
        (["bench", "--out", ""], "--out"),
        (["simulate", "--validate-published", "--plot", ""], "--plot"),
        (["sweep", "spec.toml", "--report", ""], "--report"),
        # An empty store fell back to $TRAINSCALE_STORE (run) or read '.' (runs list).
        (["run", "mnist-cnn", "--steps", "1", "--store", ""], "--store"),
        (["runs", "list", "--store", " "], "--store"),
        (["bench", "--store", ""], "--store"),
        # An empty baseline fell back to the default one unsaid.
        (["report", "--runs", "abc", "--out", "r", "--baseline", ""], "--baseline"),
    ],
)
def test_an_empty_output_path_is_one_line(capsys, args, option):
    assert run_cli(args) == 2
    assert f"argument {option}: is empty" in one_error_line(capsys)
