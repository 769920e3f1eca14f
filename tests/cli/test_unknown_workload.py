"""Every command that takes a workload name refuses an unknown one the same way, first."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.workloads import architecture_names, workload_names

from tests.helpers.cli import one_error_line, run_cli


@pytest.mark.parametrize(
    "command",
    [
        ["predict-time-to-accuracy", "nosuch"],
        ["predict-time-to-accuracy", "nosuch", "--calibrate-from", "abc"],
        ["simulate", "nosuch", "--calibrate-from", "abc"],
        ["simulate", "nosuch"],
        ["simulate", "nosuch", "--validate"],
        ["emulate", "nosuch", "--workers", "1,2", "--mode", "sync"],
        ["recommend", "nosuch"],
        ["run", "nosuch"],
        ["bench", "--workload", "nosuch"],
    ],
    ids=lambda argv: "-".join(a for a in argv if a != "nosuch")[:40],
)
def test_unknown_workload_is_the_usual_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # The store does not exist: the unknown name must be what the user hears about.
    code = run_cli([*command, "--store", str(tmp_path / "none.db")])
    assert code == 2
    valid = ", ".join(sorted(workload_names()))
    architectures = ", ".join(architecture_names())
    assert one_error_line(capsys) == (
        f"trainscale: error: unknown workload 'nosuch'; valid workloads: {valid}; "
        f"architectures (synthetic data only): {architectures}; or your "
        "own: FILE.py:ATTR or MODULE:ATTR"
    )
    assert not (tmp_path / "none.db").exists()
