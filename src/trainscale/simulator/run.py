"""The simulator's questions, end to end, from the results store: how a workload scales on a
cluster (`simulate_scaling`), how well the model predicts stored runs (`validate_simulator`),
and how long training to the target takes (`time_to_accuracy`).

Each returns a typed result with a `to_dict()` (the JSON the commands print) and, when given
`plot_dir`, writes its plots there. They take the options the commands declare
(simulator/options.py), whose values are checked when made; every other input a user can get
wrong (a plot folder, a question an option does not apply to) fails in one line before any
work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from trainscale.config.cli import refuse_given
from trainscale.errors import ConfigError, TrainscaleError
from trainscale.results.outputs import check_out_dir, replace_bytes
from trainscale.results.records import RunRecord
from trainscale.results.store import default_store_path
from trainscale.simulator.buckets import GradientLayout
from trainscale.simulator.calibrate import Calibration, probe_link
from trainscale.simulator.cluster import (
    LOCAL,
    ClusterSpec,
    load_preset,
    preset_names,
    resolve_cluster_argument,
)
from trainscale.simulator.options import (
    MonteCarloOptions,
    ScalingOptions,
    StepModelOptions,
)
from trainscale.simulator.predict import Prediction, predict_scaling
from trainscale.simulator.run_facts import device_kind
from trainscale.simulator.script_calibration import calibrate_script, script_name
from trainscale.simulator.setup import (
    cached_layout,
    calibrate,
    default_workers,
    load_runs,
    open_store,
    resolve_cluster,
)
from trainscale.simulator.time_to_accuracy import (
    TimeToAccuracyRow,
    best_by_mode,
    emulated_setting,
    predict_time_to_accuracy,
    refuse_mixed_targets,
)
from trainscale.simulator.validate import ValidationReport, validate_runs
from trainscale.workloads import get_workload, workload_name


def refuse_script(target: str | None, what: str) -> None:
    """ConfigError (one line) for a training script, or a script run's stored name
    (`script:train.py`), given to `what`, which takes workloads only; `simulate_scaling`
    predicts a script from its stored runs."""
    name = script_name(target)
    if name is not None:
        raise ConfigError(
            f"{target} is a training script: {what} takes a workload; a script's runs are "
            f"predicted by `trainscale simulate {name}` and compared by `trainscale compare` "
            "(docs/own-scripts.md)"
        )


def check_target(target: str) -> None:
    """ConfigError (one line) for an unknown workload name; a script (`script:train.py`, or
    its path) is looked for in the store later."""
    if script_name(target) is None:
        get_workload(target)


def check_plot_dir(plot_dir: str | Path | None) -> None:
    """ConfigError for a `plot_dir` where no plot could be written (said now, not after
    minutes of work)."""
    if plot_dir is not None:
        check_out_dir(Path(plot_dir), "the plots")


def write_plots(folder: str | Path, plots: Sequence[Any]) -> list[str]:
    """Write each plot's PNG into `folder` (created if needed); the paths written."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for plot in plots:
            path = folder / plot.file_name
            replace_bytes(path, plot.png)  # whole or not at all: never a cut PNG
            paths.append(str(path))
    except OSError as error:
        raise TrainscaleError(
            f"cannot write plots to {folder}: {error.strerror or error}"
        ) from None
    return paths


@dataclass
class ScalingResult:
    """Predicted steps of `workload` on `cluster`, one per worker count."""

    workload: str
    cluster: ClusterSpec
    """The cluster predicted on."""
    calibration: Calibration
    """Where compute, optimizer, data and network times came from."""
    layout: GradientLayout
    """The gradient buckets."""
    predictions: list[Prediction]
    """One per worker count."""
    plots: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "cluster": self.cluster.describe(),
            "calibration": self.calibration.to_dict(),
            "gradients": self.layout.to_dict(),
            "predictions": [p.to_dict() for p in self.predictions],
            "plots": self.plots,
        }


def simulate_scaling(
    workload: str,
    *,
    model: StepModelOptions | None = None,
    scaling: ScalingOptions | None = None,
    monte_carlo: MonteCarloOptions | None = None,
    store: str | Path | None = None,
    plot_dir: str | Path | None = None,
) -> ScalingResult:
    """Predict step time, throughput and speedup of `workload` on the cluster of `model`
    (a preset, a cluster TOML file or 'local') for each of the `scaling` worker counts
    (default: powers of two up to the cluster's devices), calibrated from stored runs.

    `workload` may be a training script (`script:train.py`, or its path): its stored runs
    calibrate it, and the parameter sizes they recorded make its buckets
    (simulator/script_calibration.py); the script decides its precision."""
    model = model or StepModelOptions()
    scaling = scaling or ScalingOptions()
    monte_carlo = monte_carlo or MonteCarloOptions()
    script = script_name(workload)
    if script is not None:
        refuse_given(
            model,
            ("precision",),
            f"does not apply to {script}: the script decides its own precision, which its "
            "stored runs measured",
        )
    # A custom workload's reference: its name.
    workload = script if script is not None else workload_name(workload)
    check_plot_dir(plot_dir)
    calibrate_from, straggler_sigma = model.calibrate_from, model.straggler_sigma
    required = bool(calibrate_from) or script is not None  # a script's runs are its calibration
    opened = open_store(Path(store or default_store_path()), required=required)
    try:
        spec = resolve_cluster(
            model.cluster or "local",
            opened,
            device=model.device,
            threads_per_worker=model.threads_per_worker,
            workload=workload,
            nodes=model.nodes,
        )
        if model.algorithm:  # the one the predictions use, as the output names it
            spec = replace(spec, algorithm=model.algorithm)
        counts = list(scaling.workers or default_workers(spec))
        for count in counts:
            spec.check_workers(count)
        if script is not None:
            assert opened is not None
            setup = calibrate_script(
                script,
                spec,
                opened,
                run_ids=calibrate_from,
                bucket_cap_mb=scaling.bucket_cap_mb,
                sigma_override=straggler_sigma,
            )
        else:
            setup = calibrate(
                workload,
                spec,
                opened,
                run_ids=calibrate_from,
                precision=model.precision,
                bucket_cap_mb=scaling.bucket_cap_mb,
                sigma_override=straggler_sigma,
            )
    finally:
        if opened is not None:
            opened.close()
    predictions = predict_scaling(
        setup.calibration,
        setup.layout,
        spec,
        counts,
        per_worker_batch=scaling.batch_size,
        global_batch=scaling.global_batch_size,
        algorithm=model.algorithm,
        samples=monte_carlo.samples,
        seed=monte_carlo.seed,
    )
    result = ScalingResult(workload, spec, setup.calibration, setup.layout, predictions)
    if plot_dir is not None:
        from trainscale.simulator.plots import scaling_plots

        result.plots = write_plots(
            plot_dir, scaling_plots(predictions, workload, spec.name, setup.calibration)
        )
    return result


@dataclass
class ValidationResult:
    """The model's predictions of stored measured runs, with their errors."""

    report: ValidationReport
    plots: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**self.report.to_dict(), "plots": self.plots}


VALIDATION_MODEL = ("cluster", "calibrate_from", "straggler_sigma")
"""The step model's options a validation takes; each run is predicted on its own machine,
at its own precision, so the rest are for predictions."""


def validate_simulator(
    *,
    workload: str | None = None,
    model: StepModelOptions | None = None,
    tag: str | None = None,
    sweep: str | None = None,
    monte_carlo: MonteCarloOptions | None = None,
    store: str | Path | None = None,
    plot_dir: str | Path | None = None,
) -> ValidationResult:
    """Predict every completed stored run (of `workload`, with `tag`, of `sweep`) that
    calibration did not use (`model.calibrate_from`, else each run's serial runs), on its
    own machine (or `model.cluster`), and the errors."""
    model = model or StepModelOptions()
    monte_carlo = monte_carlo or MonteCarloOptions()
    refuse_given(
        model,
        [item.name for item in fields(model) if item.name not in VALIDATION_MODEL],
        "is for predictions; --validate uses each run's machine and precision",
    )
    check_plot_dir(plot_dir)
    refuse_script(workload, "simulate --validate")
    cluster, straggler_sigma = model.cluster, model.straggler_sigma
    if workload:
        workload = workload_name(workload)
    store_path = Path(store or default_store_path())
    opened = open_store(store_path, required=True)
    assert opened is not None
    with opened:
        spec = None
        if cluster and cluster != "local":
            spec = resolve_cluster_argument(cluster)
        sweep_id = opened.get_sweep(sweep).sweep_id if sweep else None
        records = opened.list_runs(
            workload=workload, status="completed", tag=tag, sweep_id=sweep_id
        )
        given = load_runs(opened, model.calibrate_from)
        probes: dict[tuple[Any, str], Any] = {}

        def link_for(record):
            key = (record.machine.hostname, device_kind(record))
            if key not in probes:
                probes[key] = probe_link(opened, key[0], key[1])
            return probes[key]

        if given:
            known = {r.run_id for r in records}
            records = records + [r for r in given if r.run_id not in known]
        report = validate_runs(
            records,
            cached_layout,
            calibrate_from=given or None,
            cluster=spec,
            link_for=link_for,
            sigma_override=straggler_sigma,
            sigma_records=opened.list_runs(status="completed"),
            samples=monte_carlo.samples,
            seed=monte_carlo.seed,
        )
    if not report.rows:
        reasons = "; ".join(sorted({why for _, why in report.skipped})) or (
            "no measured run besides the calibration runs"
        )
        raise TrainscaleError(f"nothing to validate in {store_path}: {reasons}")
    result = ValidationResult(report)
    if plot_dir is not None:
        from trainscale.simulator.plots import validation_plots

        result.plots = write_plots(plot_dir, validation_plots(report))
    return result


@dataclass
class ClusterPresets:
    """The shipped cluster presets; 'local' is generated from this machine when used."""

    presets: list[ClusterSpec]
    """One per preset."""
    plots: list[str] = field(default_factory=list)
    """None drawn (as for the other results)."""

    def to_dict(self) -> dict[str, Any]:
        return {"presets": [p.describe() for p in self.presets], "generated": [LOCAL]}


def cluster_presets() -> ClusterPresets:
    """The shipped cluster presets, 'local' (made from this machine) aside."""
    return ClusterPresets([load_preset(name) for name in preset_names() if name != LOCAL])


@dataclass
class TimeToAccuracyResult:
    """Emulated steps to the target x predicted step time, per stored emulation."""

    workload: str
    cluster: ClusterSpec
    calibration: Calibration
    layout: GradientLayout
    rows: list[TimeToAccuracyRow]
    """One per emulated setting."""
    plots: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "cluster": self.cluster.describe(),
            "calibration": self.calibration.to_dict(),
            "rows": [r.to_dict() for r in self.rows],
            "best_by_mode": best_by_mode(self.rows),
            "plots": self.plots,
        }


def emulation_runs(records: list[RunRecord], emulation: str) -> list[RunRecord]:
    """The runs of the one emulation whose id is or starts with `emulation` (its tag is
    emulate:ID); ConfigError where no id is given or the prefix names several."""
    prefix = emulation.strip()
    if not prefix:
        raise ConfigError("--emulation needs an emulation id (its tag is emulate:ID)")
    ids = {
        tag.removeprefix("emulate:")
        for r in records
        if (tag := r.tag or "").startswith(f"emulate:{prefix}")
    }
    if len(ids) > 1:
        raise ConfigError(
            f"--emulation {prefix} names {len(ids)} emulations ({', '.join(sorted(ids))}); "
            "give more of its id"
        )
    return [r for r in records if (r.tag or "").removeprefix("emulate:") in ids]


def time_to_accuracy(
    workload: str,
    *,
    model: StepModelOptions | None = None,
    emulation: str | None = None,
    monte_carlo: MonteCarloOptions | None = None,
    store: str | Path | None = None,
    plot_dir: str | Path | None = None,
) -> TimeToAccuracyResult:
    """For every completed stored emulation of `workload` (only those of `emulation`, an id
    as in the tag emulate:ID, if given), predict the time per step on the cluster of `model`
    (default: this machine) and multiply by the emulated steps to the target."""
    model = model or StepModelOptions()
    monte_carlo = monte_carlo or MonteCarloOptions()
    # An unknown name is the first thing to say, before any store or emulation is looked at.
    # Emulations are of workloads: a script is never emulated.
    refuse_script(workload, "predict-time-to-accuracy")
    workload = workload_name(workload)
    check_plot_dir(plot_dir)
    store_path = Path(store or default_store_path())
    opened = open_store(store_path, required=True)
    assert opened is not None
    with opened:
        records = opened.list_runs(workload=workload, status="completed")
        if emulation is not None:
            records = emulation_runs(records, emulation)
            tag = f"emulate:{emulation.strip()}"
        emulated = [(r, s) for r in records if (s := emulated_setting(r)) is not None]
        settings = [s for _, s in emulated]
        if not settings and not get_workload(workload).real_data:
            raise TrainscaleError(
                f"{workload} is an architecture with no dataset in trainscale: it has no "
                "emulation to predict from, so no time to accuracy (`trainscale simulate "
                f"{workload}` predicts its step time)"
            )
        if not settings:
            which = f" with tag {tag}" if emulation else ""
            raise TrainscaleError(
                f"no completed emulation of {workload}{which} in {store_path}; emulate the "
                "worker counts to predict first, e.g. "
                f"`trainscale emulate {workload} --workers 1,2,4,8 --mode sync`"
            )
        refuse_mixed_targets(workload, emulated)
        spec = resolve_cluster(
            model.cluster or "local",
            opened,
            device=model.device,
            threads_per_worker=model.threads_per_worker,
            workload=workload,
            nodes=model.nodes,
        )
        if model.algorithm:
            spec = replace(spec, algorithm=model.algorithm)
        setup = calibrate(
            workload,
            spec,
            opened,
            run_ids=model.calibrate_from,
            precision=model.precision,
            sigma_override=model.straggler_sigma,
        )
    rows = predict_time_to_accuracy(
        settings,
        setup.calibration,
        setup.layout,
        spec,
        samples=monte_carlo.samples,
        seed=monte_carlo.seed,
    )
    result = TimeToAccuracyResult(workload, spec, setup.calibration, setup.layout, rows)
    if plot_dir is not None:
        from trainscale.simulator.plots import time_to_accuracy_plot

        result.plots = write_plots(
            plot_dir, time_to_accuracy_plot(rows, workload, spec.name, setup.calibration)
        )
    return result
