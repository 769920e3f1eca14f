"""`advisor.run.recommend`: the recommendation as a library call, with stand-ins for the
trial runs."""

from __future__ import annotations

import pytest

from trainscale.advisor.options import RecommendOptions
from trainscale.advisor.run import (
    RecommendListener,
    RecommendResult,
    recommend,
    search_settings,
    summary_lines,
)
from trainscale.errors import ConfigError

from tests.helpers.cli import parse_run_command
from tests.helpers.mnist_files import write_random_mnist


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)


def stub_run(options, store_path=None, quiet=False, **_):
    """Throughput grows with the cores; accuracy is the same everywhere."""
    cores = options.parallel.workers * options.parallel.threads_per_worker
    steps = options.optimisation.steps or 10
    return {
        "run_id": "0123456789abcdef",
        "samples_per_s": 1000.0 * cores,
        "train_time_s": 0.01 * steps,
        "num_samples": steps * 64,
        "test_accuracy": 0.97 if options.measurement.evaluate else None,
    }


class Heard(RecommendListener):
    def __init__(self) -> None:
        self.plans = []
        self.trials = 0

    def planned(self, plan) -> None:
        self.plans.append(plan)

    def trial_finished(self, trial) -> None:
        self.trials += 1


def test_recommend_returns_the_plan_the_best_setting_and_its_command(tmp_path, monkeypatch):
    monkeypatch.setattr("trainscale.runner.launch.execute_run", stub_run)
    data = write_random_mnist(tmp_path / "mnist", 256, 64)
    heard = Heard()
    result = recommend(
        "mnist-cnn",
        options=RecommendOptions(quick=True),
        data_dir=str(data),
        store=tmp_path / "r.db",
        listener=heard,
    )
    assert isinstance(result, RecommendResult)
    (plan,) = heard.plans
    assert plan is result.plan and plan.data_note is None and heard.trials > 0
    assert plan.settings.rung_steps == (5, 15, 45) and plan.settings.accuracy_epochs == 0.1
    assert result.recommendation.accuracy_checked
    options = parse_run_command(result.command)
    assert options.data.data_dir == str(data)
    payload = result.to_dict()
    assert payload["tag"] == f"recommend:{plan.recommend_id}"
    assert summary_lines(payload)[-1] == f"  {result.command}"


def test_synthetic_data_skips_the_accuracy_check_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr("trainscale.runner.launch.execute_run", stub_run)
    quick = RecommendOptions(quick=True)
    result = recommend("mnist-cnn", options=quick, data="synthetic", store=tmp_path / "r.db")
    assert result.plan.data_note == "--data synthetic: accuracy not checked (throughput only)"
    assert not result.recommendation.accuracy_checked
    assert "  accuracy NOT checked (no real data): throughput only" in summary_lines(
        result.to_dict()
    )
    # The command trains what was measured: it runs as printed, with no real data at hand.
    assert parse_run_command(result.command).data.kind == "synthetic"


def test_an_architectures_command_runs_as_printed(tmp_path, monkeypatch):
    monkeypatch.setattr("trainscale.runner.launch.execute_run", stub_run)
    quick = RecommendOptions(quick=True, batch_multipliers=(1,))
    result = recommend("resnet50", options=quick, store=tmp_path / "r.db")
    options = parse_run_command(result.command)  # resolved as `trainscale run` resolves it
    assert options.data.kind == "synthetic" and "--data synthetic" in result.command


def test_settings_in_points_and_quick_defaults():
    settings = search_settings(RecommendOptions(quick=True, accuracy_tolerance=1.0))
    assert (settings.warmup_steps, settings.accuracy_tolerance) == (3, 0.01)
    assert search_settings(RecommendOptions()).rung_steps == (10, 30, 90)
    with pytest.raises(ConfigError, match="percentage points, 0 to 100; got 100"):
        search_settings(RecommendOptions(accuracy_tolerance=100))
