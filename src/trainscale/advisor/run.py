"""The recommendation, end to end: the space this machine allows, every candidate checked,
the search, and the `trainscale run` command that reproduces the best setting. A workload's,
or a user's own script's (advisor/script.py).

`recommend` is what `trainscale recommend` calls; it returns a `RecommendResult` and reports
its progress to a `RecommendListener` (the CLI prints it, a Python caller may pass its own).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trainscale.advisor.options import RecommendOptions
from trainscale.advisor.recommendation import Recommendation
from trainscale.advisor.script import (
    ACCURACY_NOTE,
    fit_script_candidates,
    refuse_accuracy_check,
    refuse_options,
    script_base,
    script_command,
    script_trials,
    short_trials_note,
)
from trainscale.advisor.script_accuracy import WholeRunCheck, plan_note
from trainscale.advisor.search import (
    DEFAULT_RUNG_STEPS,
    QUICK_RUNG_STEPS,
    SearchListener,
    SearchSettings,
    round_up_s,
    run_search,
)
from trainscale.advisor.space import (
    BATCH_MULTIPLIERS,
    Candidate,
    Space,
    machine_space,
    script_space,
)
from trainscale.advisor.trials import accuracy_options
from trainscale.config.cli import run_command
from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError, DataNotFound
from trainscale.frameworks import require
from trainscale.hardware import facts
from trainscale.results.store import RunStore, default_store_path
from trainscale.runner import launch
from trainscale.runner.data_choice import DataChoice, prepare_real
from trainscale.runner.resolve import check_capacity, locate_data, resolve
from trainscale.runner.script_launch import is_script
from trainscale.workloads import command_word, get_workload

EXPLICIT_FIELDS = ("workers", "threads_per_worker", "affinity", "precision", "batch_size")
"""The searched axes: written in the recommended command even where they are the default."""


def search_settings(options: RecommendOptions) -> SearchSettings:
    """SearchSettings from what a user gives: `quick` shortens the defaults (trials of 5, 15,
    45 steps after 3 warm-up steps, a 0.1-epoch accuracy check; else 10, 30, 90 after 5, and
    0.25); `accuracy_tolerance` is in percentage points (0 to 100; default 0.5)."""
    tolerance = options.accuracy_tolerance
    if tolerance is None:
        tolerance = 0.5
    if not 0 <= tolerance < 100:
        raise ConfigError(
            f"--accuracy-tolerance is in percentage points, 0 to 100; got {tolerance}"
        )
    quick = options.quick
    rungs = options.rung_steps or (QUICK_RUNG_STEPS if quick else DEFAULT_RUNG_STEPS)
    warmup = options.warmup_steps
    if warmup is None:
        warmup = 3 if quick else 5
    epochs = options.accuracy_epochs
    if epochs is None:
        epochs = 0.1 if quick else 0.25
    return SearchSettings(
        rung_steps=tuple(rungs),
        warmup_steps=warmup,
        budget_s=options.budget_s,
        accuracy_epochs=epochs,
        accuracy_tolerance=tolerance / 100.0,
        include_busy=options.include_busy,
    )


def accuracy_base(
    base: RunOptions,
    baseline: Candidate,
    epochs: float,
    data: DataChoice,
    data_dir: str | None,
    download: bool,
) -> tuple[RunOptions | None, str | None]:
    """Real-data options for the accuracy runs, or (None, why) when they cannot be made."""
    if data == "synthetic":
        return None, "--data synthetic: accuracy not checked (throughput only)"
    real = base.with_(data="real", data_dir=data_dir, download=download)
    config, error = prepare_real(accuracy_options(baseline, real, epochs), data)
    if config is None:
        found = "NOT FOUND" if isinstance(error, DataNotFound) else "UNREADABLE"
        return None, f"REAL DATA {found}, accuracy NOT checked (throughput only): {error}"
    # Runs read from where the data was found: no second search or download per run.
    return real.with_(data_dir=config.data.data_dir), None


def fit_candidates(
    space: Space,
    throughput_base: RunOptions,
    accuracy_base: RunOptions | None,
    accuracy_epochs: float,
    cores: list[int],
) -> Space:
    """The space with every candidate checked as a run is, before any trial starts.

    A candidate's per-worker batch must fit a worker's share of the synthetic trial data
    (and of the real data of the accuracy check), and this machine's memory must hold its
    workers. A single worker whose batch exceeds the whole training set comes from
    --batch-multipliers (or the data is too small for the recipe): a mistake, refused in one
    line. Several workers whose shards are too small for the batch, or that memory cannot
    hold, are left out and say so, as other settings the machine cannot run are. `cores`
    are the usable cores the space was built for.
    """
    located: dict = {}
    advice = "use smaller --batch-multipliers (a candidate's batch is the recipe's x one)"
    kept, skipped = [], list(space.skipped)
    for candidate in [space.baseline, *space.candidates]:
        trials = [candidate.options(throughput_base)]
        if accuracy_base is not None:
            trials.append(accuracy_options(candidate, accuracy_base, accuracy_epochs))
        try:
            for options in trials:
                config, size = locate_data(resolve(options, cores), located)
                check_capacity(config, size, batch_advice=advice)
        except ConfigError as error:
            if candidate is space.baseline or (candidate.workers == 1 and not candidate.gpus):
                raise ConfigError(f"candidate {candidate.label}: {error}") from None
            skipped.append(f"{candidate.label} skipped: {error}")
            continue
        if candidate is not space.baseline:
            kept.append(candidate)
    return replace(space, candidates=kept, skipped=skipped)


@dataclass
class RecommendPlan:
    """What is about to be searched."""

    recommend_id: str
    workload: str
    env: dict[str, Any]
    """This machine's facts (`system.collect_environment`)."""
    space: Space
    """The candidates that fit this machine, with those left out and why."""
    settings: SearchSettings
    data_note: str | None
    """Why accuracy will not be checked, or None."""
    script: str | None = None
    """The user's script searched (as given), or None for a workload."""
    script_args: tuple[str, ...] = ()
    """The script's own arguments (after `--`)."""
    check_accuracy: bool = False
    """A script's accuracy is checked by whole runs after the search (`data_note` says how)."""

    @property
    def tag(self) -> str:
        """The tag of every trial run."""
        return f"recommend:{self.recommend_id}"


class RecommendListener(SearchListener):
    """What a recommendation reports as it goes: the plan, then the search's events."""

    def planned(self, plan: RecommendPlan) -> None:
        """The space is built and checked; the search starts next."""


@dataclass
class RecommendResult:
    """The recommended setting, how it was found, and the command that reproduces it."""

    plan: RecommendPlan
    recommendation: Recommendation
    command: str
    """The `trainscale run` command of the best setting (full recipe)."""
    accuracy_note: str | None = None
    """Why a script's accuracy check compared nothing (it evaluated nothing, say)."""
    accuracy_failed: bool = False
    """A script's check could not be made: the baseline's whole run failed."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `trainscale recommend --json` prints."""
        plan, settings = self.plan, self.plan.settings
        checked = plan.script is None  # a script has no short accuracy runs
        return {
            "recommend_id": plan.recommend_id,
            "workload": plan.workload,
            "script": plan.script,
            "script_args": list(plan.script_args),
            "tag": plan.tag,
            "command": self.command,
            "data_note": plan.data_note,
            "settings": {
                "rung_steps": list(settings.rung_steps),
                "warmup_steps": settings.warmup_steps,
                "keep_fraction": settings.keep_fraction,
                "budget_s": settings.budget_s,
                "accuracy_epochs": settings.accuracy_epochs if checked else None,
                "accuracy_tolerance": (
                    settings.accuracy_tolerance if checked or plan.check_accuracy else None
                ),
                "check_accuracy": plan.check_accuracy,
                "include_busy": settings.include_busy,
            },
            "space": plan.space.to_dict(),
            "accuracy_note": self.accuracy_note,
            "accuracy_failed": self.accuracy_failed,
            **self.recommendation.to_dict(),
        }


def recommend(
    workload: str | None = None,
    *,
    script: str | os.PathLike[str] | None = None,
    script_args: Sequence[str] = (),
    options: RecommendOptions | None = None,
    data: DataChoice = "auto",
    data_dir: str | None = None,
    download: bool = True,
    store: str | Path | None = None,
    listener: RecommendListener | None = None,
    framework: str = "pytorch",
) -> RecommendResult:
    """Search this machine for the fastest setting of `workload` that keeps its accuracy.

    Trials run on synthetic data (successive halving within `options.budget_s` seconds;
    their length as `search_settings` makes it from `options`); the finalists' accuracy is
    checked on real data (`data`: auto = when found) against the serial fp32 baseline. The
    per-worker batches tried are the recipe's times `options.batch_multipliers` (default 1
    and 2), on at most `options.max_workers` workers. Throughput trials on a busy machine
    are left out of the ranking unless `options.include_busy`. Every trial is stored with
    the tag recommend:<id>. Every trial trains with `framework`. Everything a user can get
    wrong (the workload, the settings, the store, the data, a batch that cannot fit) fails
    before the first trial.

    `script="train.py"` (no workload) searches a user's own training script instead, run
    with `script_args`: workers x threads x affinity only, each trial a script run stopped
    after its steps, throughput only (advisor/script.py); the options a script decides
    itself (`batch_multipliers`, `framework`, `data_dir`, `download`) and the length of the
    accuracy runs are refused in one line. `data` says what the script trains on.
    `options.check_accuracy` (a script's only, not on synthetic data) then runs the whole
    script in the baseline and in the finalists best first until one keeps the baseline's
    final accuracy within `options.accuracy_tolerance` (advisor/script_accuracy.py),
    outside the budget.
    """
    options = options or RecommendOptions()
    listener = listener or RecommendListener()
    if script is not None:
        if workload is not None:
            raise ConfigError("recommend takes a workload or a script, not both")
        refuse_options(
            {
                "--batch-multipliers": options.batch_multipliers is not None,
                "--accuracy-epochs": options.accuracy_epochs is not None,
                "--framework": framework != "pytorch",
                "--data-dir": data_dir is not None,
                "--no-download": not download,
            }
        )
    refuse_accuracy_check(
        script is not None, options.check_accuracy, options.accuracy_tolerance, data
    )
    settings = search_settings(options)
    store_path = Path(store) if store else default_store_path()
    if script is not None:
        return _recommend_script(
            os.fspath(script),
            tuple(script_args),
            settings,
            options.max_workers,
            data,
            store_path,
            listener,
            options.check_accuracy,
        )
    if workload is None:
        raise ConfigError("recommend needs a workload, or a script: `recommend SCRIPT.py -- ARGS`")
    refuse_script(workload)
    spec = get_workload(workload)
    workload = spec.name  # a custom workload's reference, from here on its name
    trains = require(framework)
    env = facts.collect_environment()
    multipliers = options.batch_multipliers
    if multipliers is None:
        multipliers = BATCH_MULTIPLIERS
    not_on_gpus = trains.gpu_reason() if env.get("gpus") else None
    space = machine_space(
        spec.name, multipliers, options.max_workers, env, with_gpus=not not_on_gpus
    )
    if not_on_gpus:
        space.skipped.append(f"GPU settings skipped: {not_on_gpus}")
    recommend_id = uuid.uuid4().hex[:8]
    base = RunOptions.of(
        workload=spec.name,
        framework=framework,
        tag=f"recommend:{recommend_id}",
        download=download,
    )
    real_base, data_note = accuracy_base(
        base, space.baseline, settings.accuracy_epochs, data, data_dir, download
    )
    throughput_base = base.with_(data="synthetic")
    space = fit_candidates(
        space, throughput_base, real_base, settings.accuracy_epochs, env["usable_cores"]
    )
    # An unusable store fails now, not after the first trial; and only once the settings
    # and the data are checked, so that a refused search leaves no empty store behind.
    RunStore(store_path).close()
    plan = RecommendPlan(recommend_id, spec.name, env, space, settings, data_note)
    listener.planned(plan)

    def run_one(options: RunOptions) -> dict[str, Any]:
        return launch.local_result(launch.execute_run(options, store_path, quiet=True))

    recommendation = run_search(
        space, throughput_base, real_base, settings, run_one, listener=listener
    )
    best = recommendation.best.options(RunOptions.of(workload=spec.name, framework=framework))
    # Without real data (none found, none asked for, or none the workload has: an
    # architecture) the command trains what the search measured: synthetic data. It runs
    # as printed, where `--data real`, the default, would be refused.
    real = real_base is not None
    command = run_command(
        best.with_(
            data="real" if real else "synthetic",
            data_dir=data_dir if real else None,
            download=download,
        ),
        explicit=EXPLICIT_FIELDS,
        workload=command_word(spec.name),
    )
    return RecommendResult(plan, recommendation, command)


def _recommend_script(
    script: str,
    args: tuple[str, ...],
    settings: SearchSettings,
    max_workers: int | None,
    data: DataChoice,
    store_path: Path,
    listener: RecommendListener,
    check_accuracy: bool,
) -> RecommendResult:
    """`recommend` of a user's own script: its placements searched, then, with
    `check_accuracy`, the finalists' accuracy in whole runs (else throughput only)."""
    recommend_id = uuid.uuid4().hex[:8]
    base = script_base(script, args, data, f"recommend:{recommend_id}")
    env = facts.collect_environment()
    numa = [node["cpus"] for node in env["numa_nodes"]] or None
    space = script_space(env["usable_cores"], numa, max_workers)
    space = fit_script_candidates(space, base, script, args)
    RunStore(store_path).close()  # an unusable store fails now, not after the first trial
    name = f"script:{Path(script).name}"
    tolerance = settings.accuracy_tolerance
    data_note = plan_note(space, tolerance) if check_accuracy else ACCURACY_NOTE
    plan = RecommendPlan(
        recommend_id, name, env, space, settings, data_note, script, args, check_accuracy
    )
    listener.planned(plan)
    run_one = script_trials(script, args, store_path)
    # The whole runs: no step limit, the script's own data and the recommend's tag.
    check = WholeRunCheck(base, space.baseline, tolerance) if check_accuracy else None
    recommendation = run_search(
        space, base, None, settings, run_one, listener=listener, check=check
    )
    planned = [timed + settings.warmup_steps for timed in settings.rung_steps]
    note = short_trials_note(recommendation.trials, planned)
    if note is not None:
        recommendation.notes.append(note)
        listener.note(note)
    command = script_command(script, args, recommendation.best, base.data.kind)
    if check is None:
        return RecommendResult(plan, recommendation, command)
    return RecommendResult(plan, recommendation, command, check.ended, check.failed)


def refuse_script(target: str) -> None:
    """ConfigError (one line) for a script run's stored name (`script:train.py`), or a
    script given as a workload: recommend searches the script itself, given as a script."""
    if target.startswith("script:"):
        raise ConfigError(
            f"{target} is a training script's stored name: recommend searches the script "
            "itself, `trainscale recommend SCRIPT.py [options] -- ARGS` (docs/own-scripts.md); "
            "its stored runs compare with `trainscale report --runs ID ...`"
        )
    if is_script(target):
        raise ConfigError(
            f"{target} is a training script, not a workload: pass it as the script "
            "(`trainscale recommend SCRIPT.py [options] -- ARGS`; from Python, script=)"
        )


def summary_lines(payload: dict[str, Any]) -> list[str]:
    """The human summary of `RecommendResult.to_dict()`: best setting, speedup, accuracy,
    rejections, ranking, notes, command."""
    best = payload["best"]
    # First: it says what the ranking below does not rest on.
    lines = [payload["busy_note"]] if payload.get("busy_note") else []
    lines.append(f"recommend {payload['recommend_id']}: {payload['workload']}")
    measured, total = payload.get("candidates_measured"), payload.get("candidates_total")
    if payload.get("only_baseline"):
        # Nothing was compared: calling the baseline "best" at 1.00x would claim a search.
        needed = payload.get("budget_needed_s")
        more = f"; a budget of about {round_up_s(needed)} s would measure all" if needed else ""
        lines += [
            f"no recommendation: only the serial baseline ({best['label']}) was measured, "
            f"{measured} of {total} candidates{more}",
        ]
    else:
        # Where faster settings lost accuracy, "no other did better" would hide them.
        why = (
            "the faster settings checked lost accuracy"
            if payload["rejected"]
            else "no other setting did better"
        )
        baseline = (
            f" (the serial baseline: {why})"
            if best["label"] == payload["baseline"]["label"]
            else ""
        )
        batch = payload.get("best_global_batch") or best["global_batch_size"]
        whose = ", the script's own" if payload.get("script") else ""
        lines.append(f"best: {best['label']} (global batch {batch}{whose}){baseline}")
        if measured is not None and total and measured < total:
            lines.append(f"  chosen among the {measured} of {total} candidates measured")
    rate, base_rate = payload["best_samples_per_s"], payload["baseline_samples_per_s"]
    if rate and base_rate and not payload.get("only_baseline"):
        steps = payload["settings"]["rung_steps"][payload["best_rung"]]
        serial = "serial 1-core" if payload.get("script") else "serial 1-core fp32"
        lines.append(
            f"  {rate:.0f} samples/s over {steps} timed steps; {serial} baseline "
            f"{base_rate:.0f} samples/s in the same rung: speedup {payload['speedup']:.2f}x"
        )
    if payload["accuracy_checked"]:
        how = (
            "whole script runs, final accuracy"
            if payload.get("script")
            else f"{payload['settings']['accuracy_epochs']:g} epoch, real data"
        )
        lines.append(
            f"  accuracy check ({how}): "
            f"{payload['best_accuracy']:.4f} against the baseline's "
            f"{payload['baseline_accuracy']:.4f} (tolerance "
            f"{payload['settings']['accuracy_tolerance'] * 100:.2f} points)"
        )
    elif payload.get("script"):
        lines.append(f"  {payload.get('accuracy_note') or payload['data_note']}")
    else:
        lines.append("  accuracy NOT checked (no real data): throughput only")
    if payload["rejected"]:
        lines.append("rejected by the accuracy check:")
        lines += [f"  {r['label']}: {r['reason']}" for r in payload["rejected"]]
    lines.append("ranking (last rung reached, samples/s there):")
    lines += [
        f"  {r['label']:<32} rung {r['rung']}  {r['samples_per_s']:.0f}" for r in payload["ranking"]
    ]
    lines += [f"note: {note}" for note in payload["notes"]]
    whole = [t["wall_s"] for t in payload["trials"] if t["kind"] == "accuracy"]
    # A script's accuracy runs are whole runs the user chose: the budget does not bound them.
    outside = (
        f", then {len(whole)} whole script run(s) of the accuracy check {sum(whole):.0f} s "
        "(not bounded by the budget)"
        if payload.get("script") and whole
        else ""
    )
    lines += [
        f"search took {payload['elapsed_s']:.0f} s of a {payload['budget_s']:.0f} s budget"
        f"{outside}; runs stored with tag {payload['tag']} "
        f"(trainscale runs list --tag {payload['tag']})",
        "to reproduce (the whole script):"
        if payload.get("script")
        else "to reproduce (full recipe):",
        f"  {payload['command']}",
    ]
    return lines
