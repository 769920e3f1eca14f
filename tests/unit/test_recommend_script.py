"""`trainscale recommend SCRIPT.py -- ARGS`: a script's search space (placements only), the
options refused for a script, and the search with stand-ins for the script runs."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.recommend.run import recommend, summary_lines
from trainscale.recommend.search import SearchSettings, run_search
from trainscale.recommend.space import Candidate, build_space, script_space
from trainscale.runner.script_launch import prepare_script

from tests.helpers.cli import one_error_line, parse_run_command, run_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist_script.py"
ARGS = ["--train-samples", "512", "--test-samples", "64"]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)


# -- the space ---------------------------------------------------------------------------


@pytest.mark.parametrize("cores", [[0, 1], [0, 1, 2, 3], [0, 1, 2, 3, 4, 5]])
def test_a_scripts_space_is_the_placements_without_precision_or_batch(cores):
    numa = [cores[: len(cores) // 2], cores[len(cores) // 2 :]] if len(cores) > 2 else None
    space = script_space(cores, numa)
    assert space.candidates
    assert all(c.precision is None and c.batch_size is None for c in space.candidates)
    assert all(c.global_batch_size is None for c in space.candidates)
    # The same placements as a workload's search, once each: no precision or batch axis.
    workload = build_space(64, cores, bf16_native=True, numa_nodes=numa)
    placements = {(c.workers, c.threads_per_worker, c.affinity) for c in workload.candidates}
    mine = [(c.workers, c.threads_per_worker, c.affinity) for c in space.candidates]
    assert set(mine) == placements and len(mine) == len(placements)
    assert space.baseline == Candidate(1, 1, "compact", None, None, ((cores[0],),))
    assert not any("bf16" in line for line in space.skipped)  # the script decides it


def test_a_scripts_candidate_sets_only_its_placement():
    candidate = Candidate(2, 1, "spread", None, None)
    assert candidate.label == "2w x 1t spread"
    base = RunOptions.of("train.py", data="synthetic", tag="recommend:x")
    options = candidate.options(base)
    default = RunOptions.of("train.py")
    assert (options.parallel.workers, options.parallel.threads_per_worker) == (2, 1)
    assert options.parallel.affinity == "spread"
    assert options.optimisation == default.optimisation  # no batch, no precision set
    prepare_script(str(EXAMPLE), [], options)  # what a script run accepts


def test_max_workers_caps_a_scripts_space():
    space = script_space([0, 1, 2, 3], max_workers=2)
    assert max(c.workers for c in space.candidates) == 2
    assert any("above --max-workers 2" in line for line in space.skipped)


# -- refusals ------------------------------------------------------------------------------


class ScriptRuns:
    """Stands in for start_script_run: each call checked as a real script run is (only the
    options a script takes), samples/s growing with the cores, each worker its own batch
    of 64, so the global batch grows with the workers."""

    def __init__(self, steps_cap: int | None = None) -> None:
        self.calls: list[tuple[RunOptions, int | None]] = []
        self.steps_cap = steps_cap

    def __call__(self, script, args, options, store_path=None, *, max_steps=None, **_):
        prepare_script(script, args, options)  # a precision or batch would be refused here
        self.calls.append((options, max_steps))
        workers = options.parallel.workers
        cores = workers * (options.parallel.threads_per_worker or 1)
        steps = max_steps if self.steps_cap is None else min(max_steps or 0, self.steps_cap)
        rate = 100.0 * cores * (1.2 if workers > 1 else 1.0)
        return {
            "run_id": f"{len(self.calls):08d}stub",
            "samples_per_s": rate,
            "train_time_s": steps * 64 * workers / rate,
            "num_samples": steps * 64 * workers,
            "num_steps": steps,
            "global_batch_size": 64 * workers,
        }


@pytest.fixture
def runs(monkeypatch):
    stub = ScriptRuns()
    monkeypatch.setattr("trainscale.recommend.script.start_script_run", stub)
    monkeypatch.setattr("trainscale.hardware.facts.collect_environment", lambda: TWO_CORES)
    return stub


TWO_CORES = {"usable_cores": [0, 1], "numa_nodes": [], "cpu_model": "test", "bf16_native": 0}


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        (["--batch-multipliers", "1,2"], "--batch-multipliers"),
        (["--accuracy-epochs", "0.1"], "--accuracy-epochs"),
        (["--accuracy-tolerance", "1"], "--accuracy-tolerance"),
        (["--framework", "jax"], "--framework"),
        (["--data-dir", "somewhere"], "--data-dir"),
        (["--no-download"], "--no-download"),
    ],
)
def test_what_a_script_decides_itself_is_refused_in_one_line(runs, capsys, flags, refused):
    assert run_cli(["recommend", str(EXAMPLE), *flags, "--", *ARGS]) == 2
    line = one_error_line(capsys)
    assert f"{refused} does not apply to a script" in line
    assert "--max-workers" in line  # what a script's recommend takes instead
    assert not runs.calls


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["recommend", "nope.py", "--", "--epochs", "1"], "script nope.py not found"),
        (["recommend", "mnist-cnn", "--", "--epochs", "1"], "arguments after -- are for a script"),
        (["recommend", "script:train.py"], "trainscale recommend SCRIPT.py [options] -- ARGS"),
        (["recommend", str(EXAMPLE), "--budget-s", "0", "--"], "--budget-s"),
    ],
)
def test_script_mistakes_cost_one_line_before_any_trial(runs, capsys, argv, fragment):
    assert run_cli(argv) == 2
    assert fragment in one_error_line(capsys)
    assert not runs.calls


def test_a_script_and_a_workload_together_are_refused():
    with pytest.raises(ConfigError, match="a workload or a script, not both"):
        recommend("mnist-cnn", script=EXAMPLE)


# -- the search ------------------------------------------------------------------------------


def test_a_scripts_search_runs_placements_stopped_after_their_steps(runs, tmp_path):
    result = recommend(
        script=EXAMPLE,
        script_args=ARGS,
        quick=True,
        data="synthetic",
        store=tmp_path / "r.db",
    )
    rec = result.recommendation
    assert not rec.accuracy_checked
    assert all(options.data.kind == "synthetic" for options, _ in runs.calls)
    assert all(o.tag == result.plan.tag for o, _ in runs.calls)
    # Each trial is stopped by the meter after its rung's steps, warm-up included.
    assert {steps for _, steps in runs.calls} <= {5 + 3, 15 + 3, 45 + 3}
    assert {o.measurement.warmup_steps_untimed for o, _ in runs.calls} == {3}
    assert rec.best.label == "2w x 1t compact"
    assert (rec.best_global_batch, rec.baseline_global_batch) == (128, 64)
    assert rec.speedup == pytest.approx(2.4)  # samples/s: 2 workers x 64 against 64
    assert any("the script's global batch at the recommended setting (128)" in n for n in rec.notes)
    # The command runs the whole script in the best setting, with its own arguments.
    words = shlex.split(result.command)
    assert words[words.index("--") + 1 :] == ARGS
    options = parse_run_command(shlex.join(words[: words.index("--")]))
    assert options.workload == str(EXAMPLE) and options.data.kind == "synthetic"
    assert (options.parallel.workers, options.parallel.threads_per_worker) == (2, 1)
    assert options.parallel.affinity == "compact"
    payload = json.loads(json.dumps(result.to_dict()))
    assert payload["script"] == str(EXAMPLE) and payload["script_args"] == ARGS
    assert payload["settings"]["accuracy_epochs"] is None
    lines = summary_lines(payload)
    assert lines[0] == f"recommend {result.plan.recommend_id}: script:mnist_script.py"
    assert "best: 2w x 1t compact (global batch 128, the script's own)" in lines
    assert any("accuracy NOT checked" in line for line in lines)
    assert lines[-2:] == ["to reproduce (the whole script):", f"  {result.command}"]


def test_a_script_shorter_than_its_trials_is_said(monkeypatch, tmp_path):
    stub = ScriptRuns(steps_cap=6)
    monkeypatch.setattr("trainscale.recommend.script.start_script_run", stub)
    monkeypatch.setattr("trainscale.hardware.facts.collect_environment", lambda: TWO_CORES)
    result = recommend(script=EXAMPLE, quick=True, max_workers=1, store=tmp_path / "r.db")
    (note,) = [n for n in result.recommendation.notes if "ended before the steps" in n]
    assert "1w x 1t compact 6 of 8" in note


def test_a_scripts_budget_is_estimated_per_step():
    """A script's candidates have no batch: the budget counts its trials' steps."""
    space = script_space([0, 1])
    clock = [0.0]

    def fake(options: RunOptions) -> dict:
        steps = options.optimisation.steps or 0
        clock[0] += 1.0 + steps * 1.0  # 1 s overhead, 1 s a step, whatever the batch
        workers = options.parallel.workers
        return {
            "run_id": "x",
            "samples_per_s": 64.0 * workers,
            "train_time_s": steps * 1.0,
            "num_samples": steps * 64 * workers,
            "num_steps": steps,
            "global_batch_size": 64 * workers,
        }

    base = RunOptions.of(str(EXAMPLE), data="synthetic")
    settings = SearchSettings(rung_steps=(2, 6), warmup_steps=1, budget_s=12.0)
    rec = run_search(space, base, None, settings, fake, clock=lambda: clock[0])
    # Rung 0: 3 trials of 4 s each; rung 1 would take 8 s more: over the budget.
    assert rec.stopped_by_budget and rec.elapsed_s == 12.0
    assert any("about 8 s more" in note for note in rec.notes)
    # Every rung's trials (the baseline counted apart, so rather more than less), per step.
    assert rec.budget_needed_s == pytest.approx((3 + 1) * 4.0 + (1 + 1) * 8.0)
