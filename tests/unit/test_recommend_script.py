"""`trainscale recommend SCRIPT.py -- ARGS`: a script's search space (placements only), the
options refused for a script, and the search with stand-ins for the script runs."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from trainscale.advisor.options import RecommendOptions
from trainscale.advisor.run import RecommendListener, recommend, summary_lines
from trainscale.advisor.script_accuracy import EVALUATED_NOTHING, WholeRunCheck
from trainscale.advisor.search import SearchSettings, run_search
from trainscale.advisor.space import Candidate, build_space, script_space
from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.runner.launch import RunFailed
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
    of 64, so the global batch grows with the workers. A whole run (no step limit) ends
    with `accuracy(workers, threads)`, its last evaluation (None: it evaluated nothing), or
    fails where `fails(workers, threads)`."""

    def __init__(self, steps_cap: int | None = None, accuracy=None, fails=None) -> None:
        self.calls: list[tuple[RunOptions, int | None]] = []
        self.steps_cap = steps_cap
        self.accuracy = accuracy or (lambda workers, threads: None)
        self.fails = fails or (lambda workers, threads: False)

    def __call__(self, script, args, options, store_path=None, *, max_steps=None, **_):
        prepare_script(script, args, options)  # a precision or batch would be refused here
        self.calls.append((options, max_steps))
        workers = options.parallel.workers
        threads = options.parallel.threads_per_worker or 1
        if max_steps is None and self.fails(workers, threads):
            raise RunFailed(f"{len(self.calls):08d}stub", "the script raised KeyError: 'x'")
        steps = 100 if max_steps is None else max_steps  # the script's own length, whole
        steps = steps if self.steps_cap is None else min(steps, self.steps_cap)
        rate = 100.0 * workers * threads * (1.2 if workers > 1 else 1.0)
        return {
            "run_id": f"{len(self.calls):08d}stub",
            "samples_per_s": rate,
            "train_time_s": steps * 64 * workers / rate,
            "num_samples": steps * 64 * workers,
            "num_steps": steps,
            "global_batch_size": 64 * workers,
            "test_accuracy": self.accuracy(workers, threads) if max_steps is None else None,
        }

    @property
    def whole(self) -> list[str]:
        """The whole runs made, as their settings' labels ('2w x 1t'), in order."""
        return [
            f"{o.parallel.workers}w x {o.parallel.threads_per_worker}t"
            for o, steps in self.calls
            if steps is None
        ]


@pytest.fixture
def runs(monkeypatch):
    stub = ScriptRuns()
    monkeypatch.setattr("trainscale.advisor.script.start_script_run", stub)
    monkeypatch.setattr("trainscale.hardware.facts.collect_environment", lambda: TWO_CORES)
    return stub


TWO_CORES = {"usable_cores": [0, 1], "numa_nodes": [], "cpu_model": "test", "bf16_native": 0}


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        (["--batch-multipliers", "1,2"], "--batch-multipliers"),
        (["--accuracy-epochs", "0.1"], "--accuracy-epochs"),
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
        options=RecommendOptions(quick=True),
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
    (line,) = [line for line in lines if "accuracy NOT checked" in line]
    assert line.endswith("(--check-accuracy runs the whole script to check it)")
    assert not payload["settings"]["check_accuracy"] and not runs.whole
    assert lines[-2:] == ["to reproduce (the whole script):", f"  {result.command}"]


def test_a_script_shorter_than_its_trials_is_said(monkeypatch, tmp_path):
    stub = ScriptRuns(steps_cap=6)
    monkeypatch.setattr("trainscale.advisor.script.start_script_run", stub)
    monkeypatch.setattr("trainscale.hardware.facts.collect_environment", lambda: TWO_CORES)
    options = RecommendOptions(quick=True, max_workers=1)
    result = recommend(script=EXAMPLE, options=options, store=tmp_path / "r.db")
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


# -- the accuracy check: whole runs (--check-accuracy) -------------------------------------


def whole_runs(monkeypatch, **behaviour) -> ScriptRuns:
    """The stand-in script runs, with whole runs that behave as `behaviour` says."""
    stub = ScriptRuns(**behaviour)
    monkeypatch.setattr("trainscale.advisor.script.start_script_run", stub)
    monkeypatch.setattr("trainscale.hardware.facts.collect_environment", lambda: TWO_CORES)
    return stub


def checked(tmp_path, listener=None, **options):
    """recommend() of the example script with --check-accuracy, quick; its result and the
    summary's lines."""
    result = recommend(
        script=EXAMPLE,
        script_args=ARGS,
        options=RecommendOptions(quick=True, check_accuracy=True, **options),
        store=tmp_path / "r.db",
        listener=listener,
    )
    return result, summary_lines(json.loads(json.dumps(result.to_dict())))


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (
            ["recommend", str(EXAMPLE), "--accuracy-tolerance", "1", "--", *ARGS],
            "--accuracy-tolerance applies to a script only with --check-accuracy",
        ),
        (
            ["recommend", str(EXAMPLE), "--check-accuracy", "--data", "synthetic", "--", *ARGS],
            "--check-accuracy needs the script's own data",
        ),
        (["recommend", "mnist-cnn", "--check-accuracy"], "--check-accuracy is for a script"),
    ],
)
def test_an_accuracy_check_that_cannot_apply_costs_one_line(runs, capsys, argv, fragment):
    assert run_cli(argv) == 2
    assert fragment in one_error_line(capsys)
    assert not runs.calls


def test_the_first_finalist_that_keeps_the_accuracy_is_recommended(monkeypatch, tmp_path):
    stub = whole_runs(monkeypatch, accuracy=lambda workers, threads: 0.9)
    seen = []
    listener = type("Plan", (RecommendListener,), {"planned": lambda self, p: seen.append(p)})
    result, lines = checked(tmp_path, listener=listener())
    rec = result.recommendation
    assert rec.best.label == "2w x 1t compact" and not rec.rejected
    assert (rec.accuracy_checked, rec.baseline_accuracy, rec.best_accuracy) == (True, 0.9, 0.9)
    # The baseline whole, then the fastest finalist, which passes: no more runs.
    assert stub.whole == ["1w x 1t", "2w x 1t"]
    whole = [o for o, steps in stub.calls if steps is None]
    assert {o.tag for o in whole} == {result.plan.tag}
    assert {o.data.kind for o in whole} == {"real"}  # the script's own data
    assert [t.kind for t in rec.trials[-2:]] == ["accuracy", "accuracy"]
    assert any("admitted because the accuracy check passed" in n for n in rec.notes)
    (plan,) = seen
    assert "up to 3 whole script runs" in plan.data_note  # the baseline's, and 2 finalists'
    assert "--budget-s does not bound them" in plan.data_note
    line = "  accuracy check (whole script runs, final accuracy): 0.9000 against the baseline's"
    assert f"{line} 0.9000 (tolerance 0.50 points)" in lines
    assert "then 2 whole script run(s) of the accuracy check" in lines[-3]


def test_a_finalist_that_loses_accuracy_is_rejected_and_the_next_checked(monkeypatch, tmp_path):
    stub = whole_runs(monkeypatch, accuracy=lambda workers, threads: 0.5 if workers > 1 else 0.9)
    result, lines = checked(tmp_path, accuracy_tolerance=5.0)
    rec = result.recommendation
    # Ranked 2w x 1t (2.4x), 1w x 2t (2x), the baseline: the second is recommended.
    assert stub.whole == ["1w x 1t", "2w x 1t", "1w x 2t"]
    assert rec.best.label == "1w x 2t compact" and rec.speedup == pytest.approx(2.0)
    (rejected,) = rec.rejected
    assert rejected.candidate.label == "2w x 1t compact" and rejected.test_accuracy == 0.5
    assert rejected.reason == (
        "test accuracy 0.5000 is 40.00 points below the baseline's 0.9000 (tolerance 5.00)"
    )
    assert "  2w x 1t compact: test accuracy 0.5000 is 40.00 points below" in "\n".join(lines)
    payload = result.to_dict()
    assert payload["accuracy_checked"] and payload["best_accuracy"] == 0.9
    assert payload["rejected"][0]["test_accuracy"] == 0.5
    assert payload["settings"]["accuracy_tolerance"] == 0.05
    assert payload["settings"]["check_accuracy"] and payload["accuracy_note"] is None


def test_every_finalist_rejected_recommends_the_baseline(monkeypatch, tmp_path):
    stub = whole_runs(monkeypatch, accuracy=lambda w, t: 0.9 if (w, t) == (1, 1) else 0.8)
    result, lines = checked(tmp_path)
    rec = result.recommendation
    assert stub.whole == ["1w x 1t", "2w x 1t", "1w x 2t"]  # as many as the plan said
    assert rec.best == rec.baseline and rec.best_accuracy == 0.9
    assert [r.candidate.label for r in rec.rejected] == ["2w x 1t compact", "1w x 2t compact"]
    assert rec.speedup == pytest.approx(1.0)  # the baseline ranked, as the workload's check
    assert lines[1] == (
        "best: 1w x 1t compact (global batch 64, the script's own) (the serial baseline: the "
        "faster settings checked lost accuracy)"
    )


def test_a_script_that_evaluates_nothing_keeps_its_throughput_recommendation(monkeypatch, capsys):
    stub = whole_runs(monkeypatch)  # its whole runs evaluate nothing
    assert run_cli(["recommend", str(EXAMPLE), "--quick", "--check-accuracy", "--", *ARGS]) == 0
    out = capsys.readouterr().out
    assert stub.whole == ["1w x 1t"]  # the baseline's says so: no finalist is run whole
    assert "best: 2w x 1t compact" in out
    assert f"  {EVALUATED_NOTHING}" in out.splitlines()
    assert "the script evaluated nothing: accuracy not checked" in EVALUATED_NOTHING


def test_a_baseline_whose_whole_run_fails_exits_1_with_the_search_kept(monkeypatch, capsys):
    whole_runs(monkeypatch, accuracy=lambda w, t: 0.9, fails=lambda w, t: (w, t) == (1, 1))
    argv = ["recommend", str(EXAMPLE), "--quick", "--check-accuracy", "--json", "--", *ARGS]
    assert run_cli(argv) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["accuracy_failed"] and not payload["accuracy_checked"]
    assert payload["accuracy_note"].startswith(
        "the serial baseline's whole script run failed (the script raised KeyError: 'x')"
    )
    assert payload["best"]["label"] == "2w x 1t compact"  # the throughput ranking stands


def test_nothing_is_run_whole_where_the_baseline_is_the_fastest():
    space = script_space([0])  # one core: the baseline's setting is the only one
    base = RunOptions.of(str(EXAMPLE))
    check = WholeRunCheck(base, space.baseline, 0.005)
    steps: list[int | None] = []

    def run_one(options: RunOptions) -> dict:
        steps.append(options.optimisation.steps)
        return {"run_id": "x", "samples_per_s": 64.0, "train_time_s": 1.0, "num_samples": 64}

    rec = run_search(space, base, None, SearchSettings(rung_steps=(1,)), run_one, check=check)
    assert rec.best == space.baseline and not rec.accuracy_checked
    assert None not in steps  # no whole run
    assert check.ended is not None and "no whole script run made" in check.ended


def test_whole_runs_are_outside_the_budget():
    """The budget bounds the search; the whole runs the user asked for take what they take."""
    space = script_space([0, 1])
    clock = [0.0]

    def fake(options: RunOptions) -> dict:
        steps = options.optimisation.steps
        workers = options.parallel.workers
        clock[0] += 1.0 + (steps or 0) if steps is not None else 100.0  # whole: 100 s
        return {
            "run_id": "x",
            "samples_per_s": 64.0 * workers,
            "train_time_s": float(steps or 100),
            "num_samples": (steps or 100) * 64 * workers,
            "num_steps": steps or 100,
            "global_batch_size": 64 * workers,
            "test_accuracy": 0.9 if steps is None else None,
        }

    base = RunOptions.of(str(EXAMPLE))
    settings = SearchSettings(rung_steps=(2,), warmup_steps=1, budget_s=30.0)
    check = WholeRunCheck(base, space.baseline, 0.005)
    rec = run_search(space, base, None, settings, fake, clock=lambda: clock[0], check=check)
    assert rec.accuracy_checked and rec.best.workers == 2
    assert clock[0] == 3 * 4.0 + 2 * 100.0  # 3 trials of 4 s, then 2 whole runs
    assert rec.elapsed_s == 12.0 and not rec.stopped_by_budget
    assert not any("over the" in note for note in rec.notes)
