"""The API's questions beyond one run, as `trainscale recommend`, `simulate`, `emulate` and
`predict-time-to-accuracy` ask them: the fastest setting here that keeps accuracy, the
scaling on a cluster beyond this machine, what N workers cost in accuracy, and the time to
accuracy that makes on a cluster. Keywords are checked as `calls` checks them
(api/keywords.py); results are read back from the store where runs were made."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trainscale.advisor.options import RecommendOptions
from trainscale.advisor.run import RecommendResult
from trainscale.advisor.run import recommend as search_recommendation
from trainscale.api.keywords import check_arguments, check_keywords, run_options
from trainscale.api.main_guard import check_main_guard
from trainscale.api.progress import EmulationLines, RecommendLines
from trainscale.api.results import (
    Emulation,
    Recommendation,
    ScalingPrediction,
    TimeToAccuracy,
)
from trainscale.api.stored import StorePath, store_file, stored_runs
from trainscale.api.workload_arg import needs_a_workload, workload_text
from trainscale.config.options import option_leaves
from trainscale.emulation.options import EmulationOptions
from trainscale.emulation.run import EMULATED_OPTIONS, run_emulation
from trainscale.errors import ConfigError
from trainscale.simulator.options import MonteCarloOptions, ScalingOptions, StepModelOptions
from trainscale.simulator.run import simulate_scaling, time_to_accuracy
from trainscale.simulator.time_to_accuracy import best_by_mode


def recommend(
    workload: Any = None,
    *,
    script: str | os.PathLike[str] | None = None,
    script_args: list[str] | tuple[str, ...] = (),
    store: StorePath = None,
    progress: bool = False,
    **options: Any,
) -> Recommendation:
    """Search this machine for the fastest setting of `workload` that keeps its accuracy,
    as `trainscale recommend` does: short trials on synthetic data (successive halving
    within `budget_s`), then the finalists' accuracy on real data against the serial fp32
    baseline. Every trial is stored, tagged recommend:<id>.

    Options (as the CLI's flags): `budget_s`, `quick`, `rung_steps`, `warmup_steps`,
    `batch_multipliers`, `max_workers`, `include_busy`, `accuracy_epochs`,
    `accuracy_tolerance` (percentage points), `check_accuracy` (a script's), `data`,
    `data_dir`, `download`, `framework`. Raises ConfigError (or another TrainscaleError)
    for a mistake, before the first trial.

    `script="train.py"` (no workload) searches your own training script instead, as
    `trainscale recommend train.py -- ARGS` does: `script_args` are its own arguments
    (docs/own-scripts.md).
    """
    check_main_guard("recommend")
    given = {"workload": workload, "store": store, "progress": progress}
    given.update(script=script, script_args=script_args)
    leave_out = ("workload", "store", "listener", "script", "script_args", "options")
    sources = ((recommend, ()), (search_recommendation, leave_out), (RecommendOptions, ()))
    checked = check_arguments("recommend", {**given, **options}, *sources)
    options = {key: value for key, value in checked.items() if key not in given}
    search = {k: options.pop(k) for k in list(options) if k in option_leaves(RecommendOptions)}
    if script is not None and workload is not None:
        raise ConfigError("recommend() takes a workload or script=..., not both")
    if script is None and workload is None:
        raise needs_a_workload("recommend", or_script=True)
    result = search_recommendation(
        None if workload is None else workload_text(workload),
        script=None if script is None else os.fspath(script),
        script_args=list(script_args),
        options=RecommendOptions(**search),
        store=store_file(store),
        listener=RecommendLines() if progress else None,
        **options,
    )
    return _recommendation(result, store)


def simulate(
    workload: Any = None,
    *,
    store: StorePath = None,
    plot: str | os.PathLike[str] | None = None,
    **options: Any,
) -> ScalingPrediction:
    """Predict the step time, throughput and speedup of `workload` at each worker count on
    a cluster, as `trainscale simulate WORKLOAD` does, calibrated from the stored runs.

    Options (as the CLI's flags): the cluster and its step model (`cluster`: a preset, a
    cluster TOML file or 'local'; `nodes`, `calibrate_from` (run ids), `precision`,
    `device`, `threads_per_worker`, `algorithm`, `straggler_sigma`), the scaling question
    (`workers`: a list of counts; `batch_size` or `global_batch_size`, `bucket_cap_mb`), the
    Monte Carlo (`samples`, `seed`) and `plot` (a directory for the PNG plots). `workload`
    may be a name, a custom workload's reference or function, or `script:train.py`.
    """
    sources = (
        (simulate, ("workload",)),
        (StepModelOptions, ()),
        (ScalingOptions, ()),
        (MonteCarloOptions, ()),
    )
    checked = check_arguments("simulate", {"store": store, "plot": plot, **options}, *sources)
    if workload is None:
        raise needs_a_workload("simulate")
    result = simulate_scaling(
        workload_text(workload),
        model=_declared(StepModelOptions, checked),
        scaling=_declared(ScalingOptions, checked),
        monte_carlo=_declared(MonteCarloOptions, checked),
        store=store_file(store),
        plot_dir=None if plot is None else Path(plot),
    )
    return ScalingPrediction(
        workload=result.workload,
        cluster=result.cluster.name,
        device=result.cluster.device.name,
        calibration=result.calibration.source,
        points=tuple(p.to_dict() for p in result.predictions),
        plots=tuple(Path(p) for p in result.plots),
        data=result.to_dict(),
    )


def emulate(
    workload: Any = None,
    *,
    workers: list[int] | tuple[int, ...] | None = None,
    mode: str | None = None,
    store: StorePath = None,
    progress: bool = False,
    **options: Any,
) -> Emulation:
    """Train `workload` in one process the way each of `workers` data-parallel workers
    would optimise it, as `trainscale emulate` does, one stored run per worker count
    (tagged emulate:<id>): what N workers cost in accuracy, on real data.

    `mode` is 'sync' (DDP: a global batch of N workers), 'async' (a parameter server, stale
    gradients) or 'local-sgd' (periodic averaging). Options (as the CLI's flags): the
    emulation's (`per_worker_batch_size`, `local_steps`, `staleness_spread`,
    `staleness_aware_lr`) and the run options that shape the optimisation (`lr_scaling`,
    `lr`, `optimizer`, `epochs` or `steps`, `seed`, `eval_every`, `target_accuracy`, `data`,
    `data_dir`, `download`, `workload_options`). docs/emulation.md says what is emulated.
    """
    emulation_keys = option_leaves(EmulationOptions)
    check_keywords(
        "emulate",
        {"store": store, "progress": progress, **options},
        [*emulation_keys, *EMULATED_OPTIONS, "store", "progress"],
    )
    if workload is None:
        raise needs_a_workload("emulate")
    if workers is None or mode is None:
        raise ConfigError(
            "emulate() needs the worker counts and the mode: workers=[1, 2, 4], mode='sync' "
            "(or 'async', 'local-sgd')"
        )
    given = {"workers": workers, "mode": mode}
    given.update({k: options.pop(k) for k in list(options) if k in emulation_keys})
    emulation = check_arguments("emulate", given, (EmulationOptions, ()))
    text = workload_text(workload)
    run = run_options("emulate", text, {"store": store, **options}, (emulate, ("workload",)))
    result = run_emulation(
        run,
        EmulationOptions(**emulation),
        store=None if store is None else os.fspath(store),
        listener=EmulationLines() if progress else None,
    )
    return Emulation(
        emulation_id=result.emulation_id,
        workload=result.workload,
        mode=result.mode,
        report_command=result.report_command,
        points=tuple(result.rows),
        runs=stored_runs(store, tag=result.tag),
        data=result.to_dict(),
    )


def predict_time_to_accuracy(
    workload: Any = None,
    *,
    emulation: Any = None,
    store: StorePath = None,
    plot: str | os.PathLike[str] | None = None,
    **options: Any,
) -> TimeToAccuracy:
    """Predict the time to the target accuracy of each stored emulation of `workload` on a
    cluster, as `trainscale predict-time-to-accuracy` does: the emulated steps to the
    target times the predicted time per step.

    `emulation` picks one emulation (an `Emulation` from `emulate()`, or its id); default:
    every completed one. Options (as the CLI's flags): the cluster and its step model
    (`cluster`, `nodes`, `calibrate_from`, `precision`, `device`, `threads_per_worker`,
    `algorithm`, `straggler_sigma`), the Monte Carlo (`samples`, `seed`) and `plot`.
    """
    sources = (
        (predict_time_to_accuracy, ("workload",)),
        (StepModelOptions, ()),
        (MonteCarloOptions, ()),
    )
    given = {"emulation": emulation, "store": store, "plot": plot, **options}
    checked = check_arguments("predict_time_to_accuracy", given, *sources)
    if workload is None:
        raise needs_a_workload("predict_time_to_accuracy")
    ident = emulation.emulation_id if isinstance(emulation, Emulation) else emulation
    if ident is not None and not isinstance(ident, str):
        raise ConfigError(
            "trainscale.predict_time_to_accuracy() option emulation: must be an Emulation or "
            f"its id, got {emulation!r}"
        )
    result = time_to_accuracy(
        workload_text(workload),
        model=_declared(StepModelOptions, checked),
        emulation=ident,
        monte_carlo=_declared(MonteCarloOptions, checked),
        store=store_file(store),
        plot_dir=None if plot is None else Path(plot),
    )
    return TimeToAccuracy(
        workload=result.workload,
        cluster=result.cluster.name,
        calibration=result.calibration.source,
        points=tuple(row.to_dict() for row in result.rows),
        best_by_mode=best_by_mode(result.rows),
        plots=tuple(Path(p) for p in result.plots),
        data=result.to_dict(),
    )


def _declared(cls: type[Any], checked: dict[str, Any]) -> Any:
    """The options object `cls` of the checked keywords that are its fields."""
    return cls(**{k: v for k, v in checked.items() if k in option_leaves(cls)})


def _recommendation(result: RecommendResult, store: StorePath) -> Recommendation:
    found, payload = result.recommendation, result.to_dict()
    return Recommendation(
        recommend_id=result.plan.recommend_id,
        workload=result.plan.workload,
        script=result.plan.script,
        best=found.best.label,
        command=result.command,
        speedup=found.speedup,
        samples_per_s=found.best_samples_per_s,
        baseline_samples_per_s=found.baseline_samples_per_s,
        accuracy_checked=found.accuracy_checked,
        best_accuracy=found.best_accuracy,
        baseline_accuracy=found.baseline_accuracy,
        trusted=found.trusted,
        accuracy_failed=result.accuracy_failed,
        notes=tuple(found.notes),
        setting=found.best.to_dict(),
        ranking=tuple(payload["ranking"]),
        runs=stored_runs(store, tag=result.plan.tag),
        data=payload,
    )
