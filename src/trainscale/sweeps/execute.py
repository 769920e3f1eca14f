"""Run a sweep's plan one run at a time, recording each run, resumable after any stop.

Runs execute one at a time, so no run's timing is disturbed by another. A failed run is
stored as failed (by the runner) and the sweep goes on. A sweep stopped by Ctrl-C, a crash
or SIGKILL is continued with `--resume`: the plan is made again from the same spec, runs
already completed (matched by resolved-config hash and repeat index) are skipped, and runs
left 'running' by a killed process are marked failed and made again. So every planned run
ends with exactly one completed attempt, none lost and none duplicated. A resume while an
earlier attempt still runs on this machine is refused: both would make the same runs.
"""

from __future__ import annotations

import functools
import os
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainscale.errors import TrainscaleError
from trainscale.results.owner import is_alive, is_here
from trainscale.results.records import SweepRecord
from trainscale.results.store import RunStore
from trainscale.runner import launch
from trainscale.runner.launch import RemoteResult, RunFailed
from trainscale.runner.record import SweepSlot
from trainscale.sweeps.plan import Plan, PlannedRun
from trainscale.sweeps.spec import SweepSpec
from trainscale.sweeps.step_watch import watch_steps

INTERRUPTED = "interrupted: the sweep process stopped before this run finished (resumed later)"


@dataclass
class SweepOutcome:
    sweep_id: str
    resumed: bool
    skipped_done: int = 0
    """Runs already completed by an earlier attempt of this sweep."""
    completed: list[str] = field(default_factory=list)
    failed: list[tuple[str | None, str]] = field(default_factory=list)
    """(run id, reason) of runs that failed in this attempt; the id is None where the run
    failed before its row was made."""


class SweepListener:
    """What a sweep reports as it goes; the CLI shows a progress bar, tests stay silent."""

    def start(self, sweep_id: str, todo: int, done: int) -> None: ...
    def not_resumed(self, why: str) -> None:
        """`--resume` found no sweep of this spec to continue: a new one starts; `why`."""

    def run_started(self, planned: PlannedRun) -> None: ...
    def run_step(self, planned: PlannedRun, step: int, total: int) -> None:
        """The run in progress reached `step` of `total` training steps."""

    def run_finished(self, planned: PlannedRun, result: dict[str, Any] | None, error: str | None):
        """`result` is the run's JSON dict when it completed; `error` its reason when not."""

    def stop(self) -> None: ...


def open_sweep(
    store: RunStore, spec: SweepSpec, plan: Plan, source: str, resume: bool
) -> tuple[SweepRecord, bool]:
    """The sweep to run: the newest one from this spec when resuming, else a new one.

    Returns (sweep, resumed). A resume whose plan no longer matches the stored one (the
    options resolve differently now, e.g. on another machine) is refused: its completed runs
    would not be the runs this plan asks for.
    """
    planned = [p.to_dict() for p in plan.runs]
    if resume:
        earlier = store.latest_sweep_with_spec(spec.spec_hash())
        if earlier is not None:
            _refuse_another_plan(earlier, plan)
            return earlier, True
    sweep_id = uuid.uuid4().hex
    store.create_sweep(sweep_id, spec.name, source, spec.spec_hash(), spec.to_dict(), planned)
    return store.get_sweep(sweep_id), False


def _refuse_another_plan(earlier: SweepRecord, plan: Plan) -> None:
    """TrainscaleError where `earlier`'s stored plan is not `plan` (its runs would not be
    the runs this plan asks for)."""
    stored = {(p["config_hash"], p["repeat"]) for p in earlier.plan}
    if stored != {(p.config_hash, p.repeat) for p in plan.runs}:
        raise TrainscaleError(
            f"cannot resume sweep {earlier.short_id}: its configurations resolve "
            "differently now (another machine, data location or trainscale version); "
            "run without --resume to start a new sweep"
        )


@dataclass(frozen=True)
class ResumePreview:
    """What `--resume` would continue (a dry run's look, nothing changed): the sweep, and
    its planned runs already completed, as (config_hash, repeat)."""

    sweep_id: str
    done: frozenset[tuple[str | None, int | None]]


def preview_resume(store_path: Path, spec: SweepSpec, plan: Plan) -> ResumePreview | None:
    """The sweep `--resume` would continue and its completed runs; None where it would
    start a new sweep. TrainscaleError where the resume would be refused."""
    with RunStore(store_path) as store:
        earlier = store.latest_sweep_with_spec(spec.spec_hash())
        if earlier is None:
            return None
        _refuse_another_plan(earlier, plan)
        done = frozenset(
            (r.config_hash, r.repeat_index)
            for r in store.sweep_runs(earlier.sweep_id)
            if r.status == "completed"
        )
    return ResumePreview(earlier.sweep_id, done)


def not_resumed_reason(store: RunStore, spec: SweepSpec, source: str, new: SweepRecord) -> str:
    """Why `--resume` started sweep `new`: no sweep of this spec in the store, and whether
    one of the same name or file was made from another version of it (edited since), whose
    runs are then not reused."""
    others = [s for s in store.list_sweeps() if s.sweep_id != new.sweep_id]
    same_file = next((s for s in others if s.source == source), None)
    same_name = next((s for s in others if s.name == spec.name), None)
    if same_file is not None:
        return (
            f"--resume: sweep {same_file.short_id} ({same_file.name}) was made from another "
            f"version of this spec (changed since?), so its runs are not reused; started sweep "
            f"{new.short_id}"
        )
    if same_name is not None:  # another file that happens to carry the same name
        return (
            f"--resume: sweep {same_name.short_id} has the same name but was made from "
            f"{same_name.source}, another sweep file, so its runs are not reused; started "
            f"sweep {new.short_id}"
        )
    return f"--resume: no earlier sweep of this spec in {store.path}; started sweep {new.short_id}"


def refuse_while_running(store: RunStore, sweep: SweepRecord) -> None:
    """TrainscaleError if another process of this machine is still making one of its runs.

    Runs whose process is gone were marked stale when the store was opened; a 'running' run
    of this host left after that has a live owner. (An owner on another host cannot be
    checked: such runs are taken as interrupted, as before owners were recorded.)
    """
    for record in store.sweep_runs(sweep.sweep_id):
        owner = record.owner
        if record.status != "running" or owner is None or not is_here(owner):
            continue
        if owner.pid != os.getpid() and is_alive(owner):
            raise TrainscaleError(
                f"sweep {sweep.short_id} is still running: its run {record.short_id} belongs "
                f"to {owner.describe()}; let it finish, or stop it, then resume"
            )


def execute_sweep(
    spec: SweepSpec,
    plan: Plan,
    store_path: Path,
    source: str,
    resume: bool = False,
    listener: SweepListener | None = None,
    run_one: Callable[..., dict[str, Any] | RemoteResult | None] | None = None,
) -> SweepOutcome:
    """Run every planned run not yet completed, in plan order; returns what happened.

    `run_one` defaults to `runner.launch.execute_run` (tests may pass a stand-in).
    """
    listener = listener or SweepListener()
    run_one = run_one or launch.execute_run
    # A resume must not mistake a killed run for one still being made: stale ones first.
    with RunStore(store_path, fail_stale=resume) as store:
        sweep, resumed = open_sweep(store, spec, plan, source, resume)
        if resume and not resumed:
            listener.not_resumed(not_resumed_reason(store, spec, source, sweep))
        if resumed:
            refuse_while_running(store, sweep)
            store.fail_interrupted_runs(sweep.sweep_id, INTERRUPTED)
        done = {
            (r.config_hash, r.repeat_index)
            for r in store.sweep_runs(sweep.sweep_id)
            if r.status == "completed"
        }
    tag = spec.base.get("tag") or f"sweep:{sweep.short_id}"
    todo = [p for p in plan.runs if (p.config_hash, p.repeat) not in done]
    outcome = SweepOutcome(sweep.sweep_id, resumed, skipped_done=len(plan.runs) - len(todo))
    listener.start(sweep.sweep_id, len(todo), outcome.skipped_done)
    steps_dir = tempfile.TemporaryDirectory(prefix="trainscale-sweep-")
    try:
        for planned in todo:
            listener.run_started(planned)
            steps_file = os.path.join(steps_dir.name, f"steps-{planned.item}")
            slot = SweepSlot(sweep.sweep_id, planned.item, planned.repeat, steps_file)
            config = planned.config.with_(tag=tag)
            try:
                with watch_steps(steps_file, functools.partial(listener.run_step, planned)):
                    result = launch.local_result(
                        run_one(planned.options, store_path, True, slot, config)
                    )
            except RunFailed as failure:
                outcome.failed.append((failure.run_id, failure.reason))
                listener.run_finished(planned, None, failure.reason)
                continue
            outcome.completed.append(result["run_id"])
            listener.run_finished(planned, result, None)
    finally:
        listener.stop()
        steps_dir.cleanup()
    return outcome
