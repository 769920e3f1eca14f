"""`trainscale run mnist-dbn` through the real entry point: options, both phases, display."""

from __future__ import annotations

import json

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import run_cli

# Tiny layers and a large batch: one CD epoch over 60k synthetic vectors is 120 steps.
TINY = ["-o", "layers=16", "-o", "pretrain_epochs=1", "--batch-size", "500", "--steps", "2"]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No real cache, data or home directory leaks into these tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["-o", "cd_k=zero"], "-o cd_k must be a whole number >= 1, got 'zero'"),
        (["-o", "layers=500,x"], "-o layers"),
        (["-o", "persistent=perhaps"], "-o persistent must be true or false"),
        (["-o", "pretrain_lr=-0.1"], "-o pretrain_lr"),
        (["--data", "synthetic", "-o", "pretrain_epochs=1.5"], "-o pretrain_epochs"),
        (["-o", "layers=100000,100000"], "10,079,600,010 parameters"),
    ],
)
def test_bad_option_values_are_one_line_and_exit_2(options, fragment, store_path, capsys):
    # Checked while the run is resolved, before data is looked for or a worker starts.
    assert run_cli(["run", "mnist-dbn", *options, "--store", str(store_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert fragment in err
    assert not store_path.exists() or not RunStore(store_path).list_runs()


def test_synthetic_run_stores_and_shows_both_phases(store_path, capsys):
    args = ["run", "mnist-dbn", "--data", "synthetic", *TINY, "--store", str(store_path)]
    assert run_cli([*args, "--json", "--threads-per-worker", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "completed" and result["test_accuracy"] is None
    assert result["pretrain"]["layers"][0]["num_steps"] == 60_000 // 500
    assert result["train_time_s"] == pytest.approx(
        result["pretrain_time_s"] + result["supervised_time_s"]
    )
    assert result["flops_per_sample"] > 0

    assert run_cli(["runs", "show", result["run_id"][:8], "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    rows = [line.split(maxsplit=1) for line in out.splitlines() if line.strip()]
    shown = {row[0]: row[-1] for row in rows}
    # The whole training clock, and its two phases apart.
    for key in ("train_time_s", "pretrain_time_s", "supervised_time_s"):
        assert float(shown[key]) == pytest.approx(result[key], rel=1e-5), key
    assert shown["pretrain"].startswith("{") and '"method": "CD-1"' in out
