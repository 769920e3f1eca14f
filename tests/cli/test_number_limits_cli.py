"""Numbers that pass as numbers but no run can use (a seed past 64 bits once a worker
derives its generators' seeds, a billion-epoch run, an infinite bucket or budget) are
refused in one line before any work (exit 2, nothing stored), not a traceback later in a
worker; the caps are config/limits.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli

RUN = ["run", "mnist-cnn", "--data", "synthetic", "--no-eval"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([*RUN, "--steps", "1", "--seed", str(2**64)], "--seed must be from 0 to 4,294,967,295"),
        ([*RUN, "--steps", "1", "--seed", str(2**32)], "--seed must be from 0 to 4,294,967,295"),
        ([*RUN, "--epochs", "1e308"], "--epochs must be at most 1,000,000"),
        ([*RUN, "--steps", str(10**23)], "--steps must be at most 1,000,000,000"),
        ([*RUN, "--steps", "1", "--bucket-cap-mb", "1e308"], "--bucket-cap-mb must be at most"),
        ([*RUN, "--steps", "1", "--timeout", "inf"], "expected a finite number, got 'inf'"),
        (
            [*RUN, "--steps", "1", "--lr", "1e308", "--lr-scaling", "linear"]
            + ["--global-batch-size", "1024"],
            "is not a finite number; give a smaller --lr",
        ),
        (["simulate", "mnist-cnn", "--bucket-cap-mb", "inf"], "expected a finite number"),
        (["simulate", "mnist-cnn", "--bucket-cap-mb", "1e308"], "at most 1,048,576 (a TiB)"),
        (["probe", "--timeout", "nan"], "expected a finite number, got 'nan'"),
        (["recommend", "mnist-cnn", "--budget-s", "inf"], "expected a finite number"),
        (["compare", "a", "b", "--seed", "-1"], "--seed must be from 0 to 4,294,967,295"),
    ],
)
def test_a_number_no_run_can_use_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    store = tmp_path / "runs.db"
    RunStore(store).close()
    assert run_cli([*args, "--store", str(store)]) == 2
    assert said in one_error_line(capsys)
    with RunStore(store) as opened:
        assert opened.list_runs() == []


def test_a_sweep_files_seed_past_the_cap_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[base]\nworkload = "mnist-cnn"\ndata = "synthetic"\nsteps = 1\n'
        "[grid]\nseed = [1, 99999999999999999999]\n"
    )
    assert run_cli(["sweep", str(spec), "--dry-run", "--store", str(tmp_path / "s.db")]) == 2
    assert "--seed must be from 0 to 4,294,967,295" in one_error_line(capsys)
