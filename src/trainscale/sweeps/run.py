"""A sweep, end to end: its spec from a file or a recipe, every configuration checked, the
runs made (resumable), a summary and, if asked, the report.

`run_sweep` is what `trainscale sweep` calls; it returns a `SweepResult` and reports its
progress to a `SweepRunListener` (the CLI shows a progress bar; a Python caller may pass its
own or none).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trainscale.config.suggest import did_you_mean
from trainscale.errors import ConfigError
from trainscale.reporting.build import write_report
from trainscale.results.outputs import check_out_dir
from trainscale.results.store import RunStore, default_store_path
from trainscale.sweeps.execute import (
    ResumePreview,
    SweepListener,
    SweepOutcome,
    execute_sweep,
    preview_resume,
)
from trainscale.sweeps.plan import Plan, PlannedRun, make_plan
from trainscale.sweeps.recipes import recipe_spec
from trainscale.sweeps.spec import SweepSpec, load_spec_file, parse_spec
from trainscale.sweeps.summary import SweepSummary, sweep_summary
from trainscale.workloads import get_workload


def load_sweep(
    file: str | Path | None = None,
    *,
    recipe: str | None = None,
    quick: bool = False,
    data: str | None = None,
    data_dir: str | None = None,
    workload_options: Mapping[str, str] | None = None,
) -> tuple[SweepSpec, str]:
    """(spec, source) of the sweep file `file` or the built-in `recipe` (`quick`: its
    scaled-down version); `data` and `data_dir`, when given, replace the sweep's own for
    every run. `workload_options` (`-o KEY=VALUE`) are added to the base run of every
    configuration whose workload declares the key; a key no workload of the sweep declares
    is a ConfigError. The source is what the stored sweep records: the file, or
    recipe:NAME."""
    if recipe is not None:
        raw = recipe_spec(recipe, quick=quick)
        source = f"recipe:{recipe}" + (" --quick" if quick else "")
        spec = parse_spec(raw, default_name=recipe, where=f"recipe {recipe}")
    else:
        if quick:
            raise ConfigError("--quick scales down a recipe; it needs --recipe NAME")
        if file is None:
            raise ConfigError(
                "give a sweep file or --recipe NAME (`trainscale recipes` lists them)"
            )
        spec = load_spec_file(Path(file))
        source = str(file)
    overrides: dict[str, Any] = {
        key: value for key, value in (("data_dir", data_dir), ("data", data)) if value is not None
    }
    if data == "synthetic":  # no accuracy to reach: every run trains its whole length
        overrides["stop_at_target"] = False
    if overrides:
        spec = replace(spec, base={**spec.base, **overrides})
    if workload_options:
        check_workload_options(spec, workload_options)
        spec = replace(spec, workload_options=dict(workload_options))
    return spec, source


def check_workload_options(spec: SweepSpec, given: Mapping[str, str]) -> None:
    """ConfigError (one line) for a `-o` key that no workload of `spec` declares."""
    declared: set[str] = set()
    for name in spec.workloads():
        declared |= set(get_workload(name).options)
    for key in given:
        if key not in declared:
            valid = ", ".join(sorted(declared)) or "none"
            raise ConfigError(
                f"-o {key}: no workload of sweep {spec.name!r} ({', '.join(spec.workloads())}) "
                f"has this option{did_you_mean(key, declared)}; valid -o options: {valid}"
            )


class SweepRunListener(SweepListener):
    """What a sweep reports as it goes: the planning, the plan, then each run."""

    @contextlib.contextmanager
    def planning(self) -> Iterator[None]:
        """Around the check of every configuration (options, cores, data): seconds."""
        yield

    def planned(self, spec: SweepSpec, plan: Plan, store: Path) -> None:
        """The plan is made; its runs start next (unless it is a dry run)."""

    def swept(self, result: SweepResult) -> None:
        """The runs are done (`result.outcome`, `result.summary`); the report comes next."""

    def would_resume(self, result: SweepResult) -> None:
        """A dry run with --resume: what the resume would continue (`result.resume_preview`,
        None when it would start a new sweep)."""


@dataclass
class SweepResult:
    """What a sweep did (or, for a dry run, would do)."""

    spec: SweepSpec
    source: str
    store: Path
    plan: Plan
    outcome: SweepOutcome | None = None
    """None for a dry run."""
    summary: SweepSummary | None = None
    report: Path | None = None
    """The report written, or None."""
    resume_preview: ResumePreview | None = None
    """A dry run with --resume: the sweep it would continue (None: it would start one)."""

    def done_before(self, planned: PlannedRun) -> bool:
        """A dry run with --resume: whether the sweep continued has completed `planned`."""
        preview = self.resume_preview
        return preview is not None and (planned.config_hash, planned.repeat) in preview.done

    def would_resume_line(self) -> str:
        """A dry run with --resume: the line that says what the resume would continue."""
        if self.resume_preview is None:
            return "--resume: no earlier sweep of this spec: it would start a new one"
        total = len(self.plan.runs)
        done = sum(map(self.done_before, self.plan.runs))
        return (
            f"--resume would continue sweep {self.resume_preview.sweep_id[:8]}: {done} of "
            f"{total} run(s) completed there, {total - done} to run (--dry-run: none started)"
        )

    @property
    def nothing_completed(self) -> bool:
        """No run of the sweep completed, and one failed in this attempt."""
        outcome = self.outcome
        if outcome is None:
            return False
        return not outcome.completed and not outcome.skipped_done and bool(outcome.failed)


def run_sweep(
    spec: SweepSpec,
    source: str,
    *,
    store: str | Path | None = None,
    resume: bool = False,
    report: str | Path | None = None,
    dry_run: bool = False,
    listener: SweepRunListener | None = None,
) -> SweepResult:
    """Run every configuration of `spec`, one run at a time, each repeated as asked, under
    one sweep id; a failed run is stored as failed and the sweep goes on.

    The store, the report directory and every configuration are checked before the first
    run. `resume` continues the newest sweep made from the same spec (completed runs are
    skipped); `dry_run` only plans. With `report`, the sweep's report is written there at
    the end. Ctrl-C or SIGTERM stops it as KeyboardInterrupt, the run in progress recorded.
    """
    listener = listener or SweepRunListener()
    store_path = Path(store) if store is not None else default_store_path()
    # Fail on an unusable store now, not after the plan's data checks.
    RunStore(store_path).close()
    report_dir = Path(report) if report is not None else None
    if report_dir is not None:  # and on a report that cannot be written, not after every run
        check_out_dir(report_dir)
    with listener.planning():
        plan = make_plan(spec)
    listener.planned(spec, plan, store_path)
    result = SweepResult(spec, source, store_path, plan)
    if dry_run:
        if resume:
            result.resume_preview = preview_resume(store_path, spec, plan)
            listener.would_resume(result)
        return result
    result.outcome = execute_sweep(spec, plan, store_path, source, resume, listener)
    result.summary = sweep_summary(store_path, result.outcome.sweep_id)
    listener.swept(result)
    if report_dir is not None:
        result.report = write_report(
            store_path, sweep_id=result.outcome.sweep_id, out_dir=report_dir
        )
    return result
