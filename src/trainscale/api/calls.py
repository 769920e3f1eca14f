"""The API's functions: what `trainscale run`, `bench`, `sweep`, `compare`, `runs list`
and `report` do, called from Python, through the same functions the CLI handlers call
(`recommend`, `simulate` and `emulate` are in api/questions.py).

Keyword arguments are the CLI's flags without dashes (`global_batch_size=128`); an unknown
one, or a value not of the keyword's declared type, is a ConfigError naming it, before
anything starts (api/keywords.py). A user mistake raises the TrainscaleError subclass the
CLI prints as its one line; a run that started and failed raises `RunFailed` (its `run_id`
and `reason`), and is stored as failed exactly as from the CLI. Quiet by default:
`progress=True` prints short lines on stderr.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainscale.api.keywords import check_arguments, parameters, run_options
from trainscale.api.main_guard import check_main_guard
from trainscale.api.progress import BenchLines, SweepLines, say
from trainscale.api.results import (
    BenchResults,
    Comparison,
    ReportFiles,
    StoredRun,
    StoredRuns,
    SweepResults,
)
from trainscale.api.stored import (
    StorePath,
    checked_filters,
    store_file,
    stored_id,
    stored_ids,
    stored_run,
)
from trainscale.api.workload_arg import needs_a_workload, workload_text
from trainscale.benchmark.document import bench_document, bench_runs
from trainscale.benchmark.options import BenchOptions
from trainscale.benchmark.run import BenchResult, run_bench
from trainscale.config.options import option_leaves
from trainscale.errors import ConfigError
from trainscale.reporting.build import build_report
from trainscale.reporting.compare_runs import compare as compare_runs
from trainscale.reporting.listing import list_runs
from trainscale.reporting.report_document import report_document
from trainscale.results.store import default_store_path
from trainscale.runner.launch import RemoteResult, start_run
from trainscale.runner.script_launch import start_script_run
from trainscale.sweeps.document import sweep_document, sweep_runs
from trainscale.sweeps.run import SweepResult, load_sweep, run_sweep


def run(
    workload: Any = None,
    *,
    script: str | os.PathLike[str] | None = None,
    script_args: list[str] | tuple[str, ...] = (),
    store: StorePath = None,
    progress: bool = False,
    **options: Any,
) -> StoredRun | None:
    """Train `workload` once, as `trainscale run WORKLOAD --flags` does, and return the run
    as stored.

    `workload` is a workload name or reference, as on the CLI (`"my_workload.py:make"`), or
    the function that makes a custom workload, imported from its file. `options` are the run options
    by their flat names, the flags without dashes: `workers=2`, `epochs=1`,
    `data="synthetic"`, `global_batch_size=128`, `steps=20`, `evaluate=False` (--no-eval),
    `workload_options={"file": "tweets.csv"}` (-o). Raises ConfigError (or another
    TrainscaleError) for a mistake, before anything starts or is stored, and `RunFailed`
    (with `run_id` and `reason`) when the run started and failed: it is stored as failed.
    Under an external launcher (torchrun) only global rank 0 gets the run; other ranks,
    and nodes of a multi-node run where rank 0 ran elsewhere, get None.

    `script="train.py"` (no workload) measures your own training script instead, as
    `trainscale run train.py -- ARGS` does: `script_args` are its own arguments, and only
    the options that apply to a script are taken (docs/own-scripts.md).
    """
    check_main_guard("run")
    given = {"store": store, "progress": progress, **options}
    if script is not None:
        if workload is not None:
            raise ConfigError("run() takes a workload or script=..., not both")
        given.update(script=script, script_args=script_args)
        opts = run_options("run", str(script), given, (run, ("workload",)))
        stored = start_script_run(
            os.fspath(script), list(script_args), opts, store_file(store), progress=progress
        )
        return stored_run(store, stored["run_id"])
    if workload is None:
        raise needs_a_workload("run", or_script=True)
    opts = run_options("run", workload_text(workload), given, (run, ("workload",)))
    announce = say if progress else None
    result = start_run(opts, store_file(store), quiet=not progress, announce=announce)
    if result is None or isinstance(result, RemoteResult):
        return None
    return stored_run(store, result["run_id"])


def bench(
    workload: Any = None,
    *,
    script: str | os.PathLike[str] | None = None,
    script_args: list[str] | tuple[str, ...] = (),
    store: StorePath = None,
    progress: bool = False,
    **options: Any,
) -> BenchResults:
    """Measure the ladder of settings for `workload` on this machine, as `trainscale bench`
    does: every run stored, the Markdown table written to `out` (default
    trainscale-bench.md; None: not written).

    Options (as the CLI's flags): `quick`, `steps`, `rounds`, `max_extra_rounds`, `data`
    ('auto', 'real', 'synthetic'), `data_dir`, `download`, `framework`, `out`. A setting
    whose runs fail is in the table with its reason and the bench goes on; `all_failed` says
    whether nothing completed (the CLI's exit status 1). On a busy machine, `busy` says what
    the busy rounds did and what to do.

    `script="train.py"` (no workload) benches your own training script instead, as
    `trainscale bench train.py -- ARGS` does: `script_args` are its own arguments; every
    setting runs the script at its own global batch, stopped after the bench's steps
    (docs/own-scripts.md). Without either, the workload is mnist-cnn.
    """
    check_main_guard("bench")
    given = {"workload": workload, "store": store, "progress": progress}
    given.update(script=script, script_args=script_args)
    leave_out = ("workload", "store", "listener", "script", "script_args", "options")
    sources = ((bench, ()), (run_bench, leave_out), (BenchOptions, ()))
    checked = check_arguments("bench", {**given, **options}, *sources)
    options = {key: value for key, value in checked.items() if key not in given}
    length = {key: options.pop(key) for key in list(options) if key in option_leaves(BenchOptions)}
    if script is not None and workload is not None:
        raise ConfigError("bench() takes a workload or script=..., not both")
    listener = BenchLines() if progress else None
    result = run_bench(
        "mnist-cnn" if workload is None else workload_text(workload),
        options=BenchOptions(**length),
        store=store_file(store),
        listener=listener,
        script=None if script is None else os.fspath(script),
        script_args=list(script_args),
        **options,
    )
    return _bench_results(result, store_file(store))


def sweep(
    spec_or_recipe: str | os.PathLike[str],
    *,
    store: StorePath = None,
    progress: bool = False,
    **options: Any,
) -> SweepResults:
    """Run a sweep, as `trainscale sweep FILE` or `trainscale sweep --recipe NAME` does.

    `spec_or_recipe` is a sweep file (a path, or a name ending in .toml) or a built-in
    recipe's name (`trainscale recipes`). Options (as the CLI's flags): `quick` (recipes),
    `resume`, `dry_run`, `data`, `data_dir`, `workload_options` (a dict, -o), `report` (a
    directory). A failed run is stored as failed and the sweep goes on; Ctrl-C stops it
    (the run in progress recorded) and `resume=True` continues it.
    """
    check_main_guard("sweep")
    given = {"spec_or_recipe": spec_or_recipe, "store": store, "progress": progress}
    load_keys = parameters(load_sweep, leave_out=("file", "recipe"))
    checked = check_arguments(
        "sweep",
        {**given, **options},
        (sweep, ()),
        (load_sweep, ("file", "recipe")),
        (run_sweep, ("spec", "source", "store", "listener")),
    )
    options = {key: value for key, value in checked.items() if key not in given}
    file, recipe = _sweep_source(spec_or_recipe)
    spec, source = load_sweep(
        file, recipe=recipe, **{k: v for k, v in options.items() if k in load_keys}
    )
    result = run_sweep(
        spec,
        source,
        store=store_file(store),
        listener=SweepLines() if progress else None,
        **{k: v for k, v in options.items() if k not in load_keys},
    )
    return _sweep_results(result)


def compare(a: Any, b: Any, *, store: StorePath = None, **options: Any) -> Comparison:
    """B against A, as `trainscale compare A B` does: ratios of step time and throughput
    with bootstrap intervals, and whether the difference is significant.

    Each side is a run or sweep id (or unique prefix), `SWEEP:LABEL`, or a result of this
    API (a `StoredRun`, `SweepResults`). Options: `config`, `confidence`, `resamples`,
    `seed`.
    """
    given = {"a": a, "b": b, "store": store}
    checked = check_arguments(
        "compare", {**given, **options}, (compare, ()), (compare_runs, ("a", "b", "store"))
    )
    options = {key: value for key, value in checked.items() if key not in given}
    sides = stored_id(a, "compare", "argument a"), stored_id(b, "compare", "argument b")
    found = compare_runs(*sides, store=store_file(store), **options)
    return Comparison(
        a=found.a.name,
        b=found.b.name,
        confidence=found.confidence,
        rows=tuple(found.rows),
        unmatched=tuple(found.unmatched),
        data=found.to_dict(),
    )


def runs(
    *,
    workload: Any = None,
    status: str | None = None,
    tag: str | None = None,
    limit: int | None = None,
    store: StorePath = None,
    **unknown: Any,
) -> StoredRuns:
    """The stored runs matching every filter given, newest first, at most `limit`, as
    `trainscale runs list` shows them. The store must exist."""
    given = {"workload": workload, "status": status, "tag": tag, "limit": limit, "store": store}
    check_arguments("runs", {**given, **unknown}, (runs, ()))
    workload = checked_filters(workload, status, limit)
    found = list_runs(store_file(store), workload=workload, status=status, tag=tag, limit=limit)
    return StoredRuns(tuple(StoredRun.from_record(record) for record in found.records))


def report(
    *,
    out: str | os.PathLike[str],
    sweep: Any = None,
    runs: Iterable[Any] | StoredRun | None = None,
    tag: str | None = None,
    baseline: str | None = None,
    prices: str | os.PathLike[str] | None = None,
    store: StorePath = None,
    **unknown: Any,
) -> ReportFiles:
    """Write the report of a sweep, of chosen runs or of the runs of a tag into `out`, as
    `trainscale report` does (report.html, report.md, report.csv, one PNG per plot), and
    return the paths.

    `sweep` is a sweep id (or prefix) or a `SweepResults`; `runs` run ids or `StoredRun`s
    (a `StoredRuns`, a bench's `.runs`); `tag` a tag runs were stored with (`bench:ID`,
    `emulate:ID`, `recommend:ID`, a run's own). In a notebook, show a plot with
    `IPython.display.Image(filename=report.plots[0])`.
    """
    given = {"out": out, "sweep": sweep, "runs": runs, "tag": tag}
    given.update(baseline=baseline, prices=prices)
    check_arguments("report", {**given, "store": store, **unknown}, (report, ()))
    written = build_report(
        store_file(store) or default_store_path(),
        sweep_id=None if sweep is None else stored_id(sweep, "report", "option sweep"),
        run_ids=None if runs is None else stored_ids(runs, "report", "option runs"),
        tag=tag,
        out_dir=out,
        baseline=baseline,
        prices=prices,
    )
    document = report_document(written, Path(out))
    return ReportFiles(
        out=Path(out),
        html=written.html,
        markdown=written.markdown,
        csv=written.csv,
        plots=tuple(written.plots),
        not_drawn=tuple(document["not_drawn"]),
        configurations=tuple(document["configurations"]),
        document=document,
    )


# -- helpers -------------------------------------------------------------------------------


def _sweep_source(given: str | os.PathLike[str]) -> tuple[Path | None, str | None]:
    """(file, None) for a sweep file, (None, recipe) for a recipe's name."""
    text = os.fspath(given)
    if not isinstance(given, str) or text.endswith(".toml") or Path(text).is_file():
        return Path(text), None
    return None, text


def _bench_results(result: BenchResult, store: Path | None) -> BenchResults:
    store_path = store or default_store_path()
    records = bench_runs(result, store_path)
    document = bench_document(result, store_path, records)
    return BenchResults(
        bench_id=result.bench_id,
        workload=result.workload,
        data=document["data"],
        data_note=result.data_note,
        steps=result.steps,
        rounds=result.rounds,
        global_batch_size=result.global_batch_size,
        out=result.out,
        table=tuple(document["table"]),
        pitfalls=tuple(document["pitfalls"]),
        extra_rounds=result.extra_rounds,
        busy=tuple(document["busy"]),
        baselines=tuple(document["baselines"]),
        gpu_verdicts=tuple(document["gpu_verdicts"]),
        runs=StoredRuns(tuple(StoredRun.from_record(record) for record in records)),
        configurations=tuple(document["configurations"]),
        document=document,
    )


def _sweep_results(result: SweepResult) -> SweepResults:
    outcome = result.outcome
    if outcome is None:  # a dry run: nothing stored
        document = sweep_document(result)
        planned = tuple(document["planned"])
        return SweepResults(
            None, result.spec.name, result.source, result.store, False, planned, document=document
        )
    records = sweep_runs(result.store, outcome.sweep_id)
    document = sweep_document(result, records)
    return SweepResults(
        sweep_id=outcome.sweep_id,
        name=result.spec.name,
        source=result.source,
        store=result.store,
        resumed=outcome.resumed,
        planned=tuple(document["planned"]),
        completed=tuple(outcome.completed),
        failed=tuple(outcome.failed),
        skipped_done=outcome.skipped_done,
        report=result.report,
        runs=StoredRuns(tuple(StoredRun.from_record(record) for record in records)),
        configurations=tuple(document["configurations"]),
        document=document,
    )
