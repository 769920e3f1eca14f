"""`trainscale recommend SCRIPT.py -- ARGS`: the search on a user's own training script.

A script leaves trainscale its placement only: workers, threads per worker and affinity
(`space.script_space`); it decides its model, data, batch, precision and length. Each trial
is a script run (runner/script_launch.py) that the meter stops after the trial's steps, a
normal end, and its throughput is the stored run's samples/s: a script that gives each
worker its own batch trains a global batch that grows with the workers, so step times of
two settings would compare different amounts of work.

No short accuracy check: a script has an accuracy only where it calls `meter.evaluate`,
when its own loop decides (after an epoch, say), and a trial stopped after a few steps has
usually not got there. Checking it means running the whole script once per finalist, for as
long as the script takes, which no budget bounds: so by default the recommendation is
throughput only and says so, and `--check-accuracy` asks for those whole runs
(advisor/script_accuracy.py). The printed command runs the whole script, with its own
evaluations.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainscale.advisor.space import Candidate, Space
from trainscale.advisor.trials import RunOne, Trial
from trainscale.config.cli import run_command
from trainscale.config.options import RunOptions
from trainscale.config.script import SCRIPT_OPTIONS
from trainscale.errors import ConfigError
from trainscale.runner.script_launch import is_script, prepare_script, start_script_run

ACCURACY_NOTE = (
    "a script: accuracy NOT checked (throughput only): its accuracy is its own, from its "
    "own evaluations at its own length; run the command below to see it (--check-accuracy "
    "runs the whole script to check it)"
)
"""Why a script's recommendation claims nothing about accuracy (module docstring)."""

SCRIPT_FLAGS = (
    "--budget-s, --quick, --rung-steps, --warmup-steps, --max-workers, --include-busy, "
    "--check-accuracy (and with it --accuracy-tolerance), --data, --store and --json"
)
"""The options of `trainscale recommend` that apply to a script."""


def recommend_target(target: str, separated: bool) -> tuple[str | None, str | None]:
    """(workload, script) from `trainscale recommend TARGET [-- ARGS]`: TARGET is a script
    as for `trainscale run` (a `.py` file followed by `--`, or one that calls
    `trainscale.meter()`), else a workload. ConfigError for arguments after `--` without a
    script."""
    if is_script(target, separated):
        return None, target
    if separated:
        raise ConfigError(
            "arguments after -- are for a script: `trainscale recommend SCRIPT.py [options] "
            "-- [its arguments]`"
        )
    return target, None


def refuse_options(given: Mapping[str, bool]) -> None:
    """ConfigError (one line) for the first option given (`given`: flag -> whether set)
    that a script decides itself, or that only a workload's accuracy check uses."""
    for flag, set_ in given.items():
        if set_:
            raise ConfigError(
                f"{flag} does not apply to a script (the script decides its batch, "
                "precision, framework, data and length, and its accuracy is checked only "
                "by running it whole, --check-accuracy; pass its own arguments after --); "
                f"recommend of a script takes {SCRIPT_FLAGS}"
            )


def refuse_accuracy_check(
    script: bool, check_accuracy: bool, accuracy_tolerance: float | None, data: str
) -> None:
    """ConfigError (one line) for `--check-accuracy` or its tolerance where they cannot
    apply: a workload (its accuracy is checked anyway), a script without the check, or a
    script on synthetic data (which has no accuracy)."""
    if not script:
        if check_accuracy:
            raise ConfigError(
                "--check-accuracy is for a script: a workload's accuracy is checked anyway, "
                "in short runs on real data (--accuracy-epochs; --data synthetic skips it)"
            )
        return
    if accuracy_tolerance is not None and not check_accuracy:
        raise ConfigError(
            "--accuracy-tolerance applies to a script only with --check-accuracy (which "
            "runs the whole script to compare its final accuracy with the baseline's)"
        )
    if check_accuracy and data == "synthetic":
        raise ConfigError(
            "--check-accuracy needs the script's own data: a script on --data synthetic has "
            "no accuracy to check (drop --data synthetic, or --check-accuracy)"
        )


def script_base(script: str, args: Sequence[str], data: str, tag: str) -> RunOptions:
    """The options every trial of `script` starts from, the script checked (found, compiles)
    before any trial: ConfigError otherwise. `data` says what it trains on, as for `run`:
    `synthetic`, or by default its own real data."""
    base = RunOptions.of(script, data="synthetic" if data == "synthetic" else "real", tag=tag)
    prepare_script(script, args, base)
    return base


def fit_script_candidates(
    space: Space, base: RunOptions, script: str, args: Sequence[str]
) -> Space:
    """The space with every candidate checked as a script run is before it starts: a
    setting the machine refuses is left out with its reason, or one line for the baseline."""
    kept, skipped = [], list(space.skipped)
    for candidate in [space.baseline, *space.candidates]:
        try:
            prepare_script(script, args, candidate.options(base))
        except ConfigError as error:
            if candidate is space.baseline:
                raise ConfigError(f"candidate {candidate.label}: {error}") from None
            skipped.append(f"{candidate.label} skipped: {error}")
            continue
        if candidate is not space.baseline:
            kept.append(candidate)
    return Space(kept, space.baseline, skipped, space.duplicates)


def script_trials(script: str, args: Sequence[str], store_path: Path) -> RunOne:
    """Runs one trial of the search as a script run: the options a script takes (its
    placement, warm-up, data and tag), stopped by the meter after the trial's steps, with
    no progress lines of its own. Options without steps make a whole run (the accuracy
    check's): the script to its own end, with the progress lines of `trainscale run`."""

    def run_one(options: RunOptions) -> dict[str, Any]:
        kept = {key: value for key, value in options.flat().items() if key in SCRIPT_OPTIONS}
        steps = options.optimisation.steps
        return start_script_run(
            script,
            list(args),
            RunOptions.of(options.workload, **kept),
            store_path,
            max_steps=steps,
            # A trial is a line of the search's own; a whole run may take minutes.
            progress=steps is None,
        )

    return run_one


def script_command(script: str, args: Sequence[str], best: Candidate, data: str) -> str:
    """`trainscale run SCRIPT.py --workers ... -- ARGS`: the whole script in the best
    setting. The `--` always: it makes the file a script whatever it contains."""
    options = best.options(RunOptions.of(script, data=data))
    command = run_command(
        options, explicit=("workers", "threads_per_worker", "affinity"), workload=script
    )
    return f"{command} -- {shlex.join(args)}".rstrip()


def short_trials_note(trials: Sequence[Trial], planned: Sequence[int]) -> str | None:
    """A note where the script ended before a trial's steps (its own length, e.g. one short
    epoch, is shorter than the trials): those trials timed fewer steps, or timed their
    warm-up. `planned` are the steps of each rung's trials, warm-up included."""
    short = [
        t
        for t in trials
        if t.kind == "throughput"
        and t.ok
        and t.rung is not None
        and t.num_steps is not None
        and t.num_steps < planned[t.rung]
    ]
    if not short:
        return None
    shown = ", ".join(
        f"{t.candidate.label} {t.num_steps} of {planned[t.rung or 0]}" for t in short[:3]
    )
    more = f" and {len(short) - 3} more" if len(short) > 3 else ""
    return (
        f"the script ended before the steps of {len(short)} trial(s) ({shown}{more}): it is "
        "shorter than the trials, so they measured fewer steps; give it more (its epochs or "
        "samples, after --) or use shorter --rung-steps"
    )
