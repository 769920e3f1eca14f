"""`trainscale run --stop-at-target` end to end: a data-parallel run ends at the first
evaluation that reaches its target, every rank after the same step, and is stored as
completed with that evaluation's accuracy; without an accuracy to reach, one line."""

from __future__ import annotations

import json

import pytest

from trainscale.cli.run_cmd import format_result
from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.custom_workloads import tiny_workload

ANY_CORES = ["--threads-per-worker", "1", "--affinity", "none", "--allow-oversubscribe"]


def test_two_workers_stop_together_at_the_first_evaluation_that_reaches_the_target(
    tmp_path, store_path, capsys, monkeypatch
):
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    reference = f"{tiny_workload(tmp_path)}:make_workload"
    # 384 training rows at global batch 64: 6 steps an epoch, 24 planned; an evaluation
    # every 2 steps. The tiny linear problem reaches 90% within the first epoch or two.
    # A rank that left early would leave its peer in an all-reduce until --timeout: the
    # run would fail, not complete.
    argv = ["run", reference, "--workers", "2", *ANY_CORES, "--epochs", "4", "--eval-every", "2"]
    argv += ["--target-accuracy", "0.9", "--stop-at-target", "--timeout", "30"]
    assert run_cli([*argv, "--store", str(store_path), "--json", "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "completed" and result["world_size"] == 2
    assert result["config"]["stop_at_target"] is True
    curve = result["accuracy_curve"]
    assert [accuracy >= 0.9 for _, accuracy in curve] == [False] * (len(curve) - 1) + [True]
    # Stopped at that evaluation: its accuracy is the final one, its clock the time to target.
    assert result["time_to_target_s"] == curve[-1][0]
    assert result["test_accuracy"] == curve[-1][1]
    # Evaluations fall every 2 steps (the epoch ends, at 6, 12, ..., among them).
    assert result["num_steps"] == 2 * len(curve) < 24
    assert result["stopped_at_target"] is True and result["planned_steps"] == 24
    with RunStore(store_path) as store:
        assert len(store.step_times(result["run_id"])) == result["num_steps"]
        epochs = store.epochs(result["run_id"])
    assert epochs[-1]["test_accuracy"] == result["test_accuracy"]
    steps = f"after {result['num_steps']} of 24 planned steps"
    assert f"stopped at the target (--stop-at-target) {steps}" in format_result(result)


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--no-eval"], "it cannot go with --no-eval"),
        (["--data", "synthetic"], "synthetic data has none"),
    ],
)
def test_no_accuracy_to_reach_is_one_line_exit_2_and_nothing_stored(
    extra, fragment, store_path, capsys
):
    argv = ["run", "mnist-cnn", "--stop-at-target", *extra, "--store", str(store_path)]
    assert run_cli(argv) == 2
    line = one_error_line(capsys)
    assert line.startswith("trainscale: error: --stop-at-target needs an accuracy to reach")
    assert fragment in line
    assert not store_path.exists() or not RunStore(store_path).list_runs()
