"""The API's typed results: frozen dataclasses with the headline figures as attributes,
`to_dict()` (plain data, JSON-ready) and `to_dataframe()` (pandas, optional).

Every figure is read back from the store (`RunStore`), never from the workers' messages,
so a result says what `trainscale runs show` and the exports say about the same run. The
DataFrame columns are those of `trainscale runs export --format csv` for runs, and those of
report.csv (one row per configuration) for benches and sweeps.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from trainscale.api.frames import data_frame, scalar_row
from trainscale.metrics.run_flags import ran_busy
from trainscale.reporting.csv_table import CSV_COLUMNS as CONFIGURATION_COLUMNS
from trainscale.results.export import CSV_COLUMNS as RUN_COLUMNS
from trainscale.results.export import run_to_csv_row, run_to_json_dict
from trainscale.results.records import RunRecord

REPR_RUNS = 5
"""Runs a `StoredRuns`' repr names."""


@dataclass(frozen=True)
class StoredRun:
    """One stored run, as `trainscale run --json` prints it. Figures a run did not measure
    (a failed run; accuracy on synthetic data) are None."""

    run_id: str
    workload: str | None
    status: str
    """'completed', 'failed' or 'running'."""
    error: str | None
    """Why a failed run failed."""
    data: str | None
    """'real' or 'synthetic' (synthetic: throughput only, no accuracy is claimed)."""
    framework: str
    world_size: int | None
    """Worker processes over all nodes."""
    threads_per_worker: int | None
    affinity: str | None
    precision: str | None
    global_batch_size: int | None
    """Every setting's global batch; None for a script, which decides its own."""
    tag: str | None
    samples_per_s: float | None
    """Global samples per second over the median timed step."""
    step_time_s_median: float | None
    """The run's step time: the median timed step (slowest rank's)."""
    epoch_time_s: float | None
    train_time_s: float | None
    """The training clock (evaluation off it)."""
    num_steps: int | None
    test_accuracy: float | None
    time_to_target_s: float | None
    """Training-clock seconds to the workload's target accuracy; None if not reached."""
    busy: bool
    """Other work used the run's cores while it trained: its speed is not trusted."""
    sweep_id: str | None
    config_hash: str | None
    """Hash of the settings that shape the run (equal hashes: trained the same way)."""
    created_at: str
    finished_at: str | None
    config: Mapping[str, Any] = field(repr=False, compare=False)
    """The resolved config, flat (every option concrete), as stored. (Left out of equality,
    as `config_hash` stands for it, so that a run can be hashed: a set or a dict key.)"""
    record: Mapping[str, Any] = field(repr=False, compare=False)
    """Everything stored about the run: the `--json` object (env, config, summary keys)."""
    row: Mapping[str, Any] = field(repr=False, compare=False)
    """Its row of `trainscale runs export --format csv`."""

    @classmethod
    def from_record(cls, record: RunRecord) -> StoredRun:
        """The run as stored."""
        flat = run_to_json_dict(record)
        return cls(
            run_id=record.run_id,
            workload=record.workload,
            status=record.status,
            error=record.error,
            data=record.data_kind,
            framework=record.framework,
            world_size=record.world_size,
            threads_per_worker=record.threads_per_worker,
            affinity=record.affinity,
            precision=record.precision,
            global_batch_size=record.global_batch_size,
            tag=record.tag,
            samples_per_s=flat.get("samples_per_s"),
            step_time_s_median=flat.get("step_time_s_median"),
            epoch_time_s=flat.get("epoch_time_s"),
            train_time_s=flat.get("train_time_s"),
            num_steps=flat.get("num_steps"),
            test_accuracy=flat.get("test_accuracy"),
            time_to_target_s=flat.get("time_to_target_s"),
            busy=ran_busy(record.summary),
            sweep_id=record.sweep_id,
            config_hash=record.config_hash,
            created_at=record.created_at,
            finished_at=record.finished_at,
            config=dict(record.config),
            record=flat,
            row=run_to_csv_row(record),
        )

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale run --json` object of this run."""
        return dict(self.record)

    def to_dataframe(self) -> Any:
        """A one-row DataFrame with the columns of `trainscale runs export --format csv`."""
        return data_frame([self.row], RUN_COLUMNS)


@dataclass(frozen=True, repr=False)
class StoredRuns(Sequence[StoredRun]):
    """Several stored runs (a sequence of `StoredRun`); a slice is a `StoredRuns` too."""

    runs: tuple[StoredRun, ...]

    def __iter__(self) -> Iterator[StoredRun]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    @overload
    def __getitem__(self, index: int) -> StoredRun: ...
    @overload
    def __getitem__(self, index: slice) -> StoredRuns: ...
    def __getitem__(self, index: int | slice) -> StoredRun | StoredRuns:
        if isinstance(index, slice):
            return StoredRuns(self.runs[index])
        return self.runs[index]

    def __repr__(self) -> str:
        # A line a run, as `runs list` has: each StoredRun's own repr is a screenful.
        shown = [f"{r.run_id[:8]} {r.workload} {r.status}" for r in self.runs[:REPR_RUNS]]
        more = f", ... {len(self.runs) - REPR_RUNS} more" if len(self.runs) > REPR_RUNS else ""
        return f"StoredRuns({len(self.runs)} runs: {', '.join(shown)}{more})"

    def to_dict(self) -> list[dict[str, Any]]:
        """The runs' `--json` objects (as `trainscale runs export --format json`)."""
        return [run.to_dict() for run in self.runs]

    def to_dataframe(self) -> Any:
        """One row per run, the columns of `trainscale runs export --format csv`."""
        return data_frame([run.row for run in self.runs], RUN_COLUMNS)


@dataclass(frozen=True)
class BenchResults:
    """What a bench measured: the table the CLI prints, every run, and the figures of each
    configuration that completed."""

    bench_id: str
    workload: str
    data: str
    """The data measured: 'real', or 'synthetic' (throughput only)."""
    data_note: str | None
    """Why synthetic data was measured although real data was wanted (None otherwise)."""
    steps: int
    """Training steps of a throughput setting over all rounds."""
    rounds: int
    global_batch_size: int | None
    """Every setting's global batch; None for a script, which decides its own."""
    out: Path | None
    """The Markdown table written, or None."""
    table: tuple[Mapping[str, str], ...] = field(repr=False)
    """The rows `trainscale bench` prints, as text cells (skipped and failed settings too,
    with their note)."""
    pitfalls: tuple[str, ...] = field(repr=False)
    """Each sound setting against its naive pitfall, one line each."""
    runs: StoredRuns = field(repr=False)
    """Every run of the bench, in the order they ran (failed ones too)."""
    configurations: tuple[Mapping[str, Any], ...] = field(repr=False)
    """One row per setting with a completed run: `setting` (the bench's name for it), then
    report.csv's columns (speedups against the serial 1-core setting)."""
    extra_rounds: int = 0
    """Rounds measured again because a round had a run on a busy machine."""
    busy: tuple[str, ...] = field(default=(), repr=False)
    """What busy rounds did to the table and what to do, one line each (empty on a quiet
    machine); a setting with busy rounds only has 'not trusted: busy machine' as its
    verdict."""
    baselines: tuple[str, ...] = field(default=(), repr=False)
    """Which baseline the speedups answer, and each setting against 1 process x all cores
    as threads, one line each."""
    gpu_verdicts: tuple[str, ...] = field(default=(), repr=False)
    """Each GPU setting against the fastest CPU setting, paired over the rounds: '1 GPU:
    9.4x [8.9, 9.8] faster than ...' (empty without GPUs)."""
    document: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The `trainscale bench --json` object."""

    @property
    def all_failed(self) -> bool:
        """No run of the bench completed."""
        return not any(run.status == "completed" for run in self.runs)

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale bench --json` object: the fields, with the runs as their `--json`
        objects."""
        return dict(self.document)

    def to_dataframe(self) -> Any:
        """One row per configuration: `setting`, then report.csv's columns."""
        return data_frame(self.configurations, ("setting", *CONFIGURATION_COLUMNS))


@dataclass(frozen=True)
class SweepResults:
    """What a sweep did (or, with `dry_run`, would do)."""

    sweep_id: str | None
    """None for a dry run (nothing is stored)."""
    name: str
    source: str
    """The sweep file, or recipe:NAME."""
    store: Path
    resumed: bool
    planned: tuple[Mapping[str, Any], ...] = field(repr=False)
    """The plan: item, label, config_hash, repeat, workload of every run."""
    completed: tuple[str, ...] = ()
    """Ids of the runs completed in this call."""
    failed: tuple[tuple[str | None, str], ...] = ()
    """(run id, reason) of the runs that failed in this call."""
    skipped_done: int = 0
    """Runs an earlier attempt had completed (with `resume`)."""
    report: Path | None = None
    """The report's HTML page, when one was asked for."""
    runs: StoredRuns = field(default=StoredRuns(()), repr=False)
    """Every run of the sweep (earlier attempts' too)."""
    configurations: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    """One row per configuration with a completed run: report.csv's columns."""
    document: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The `trainscale sweep --json` object."""

    @property
    def dry_run(self) -> bool:
        return self.sweep_id is None

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale sweep --json` object: the fields, with the runs as their `--json`
        objects."""
        return dict(self.document)

    def to_dataframe(self) -> Any:
        """One row per configuration (report.csv's columns); for a dry run, one row per
        planned run (item, label, config_hash, repeat, workload)."""
        if self.dry_run:
            return data_frame(self.planned, ("item", "label", "config_hash", "repeat", "workload"))
        return data_frame(self.configurations, CONFIGURATION_COLUMNS)


@dataclass(frozen=True, repr=False)
class Comparison:
    """B against A (`trainscale compare`): one row per matched configuration."""

    a: str
    """Side A, as the CLI names it."""
    b: str
    confidence: float
    rows: tuple[Mapping[str, Any], ...] = field(repr=False)
    """Per configuration: label, runs, ratios B/A with intervals, significance, warnings
    (the `comparisons` of `trainscale compare --json`)."""
    unmatched: tuple[str, ...] = ()
    """Configurations found on one side only."""
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The `trainscale compare --json` object."""

    @property
    def throughput_ratio(self) -> float | None:
        """B/A throughput of the first configuration (the only one comparing two runs)."""
        return self.rows[0].get("throughput_ratio") if self.rows else None

    @property
    def significant(self) -> bool | None:
        """Whether the first configuration's throughput interval excludes 1.0 (never where
        a run on either side ran on a busy machine: see `trusted`)."""
        return self.rows[0].get("significant") if self.rows else None

    @property
    def trusted(self) -> bool | None:
        """False where a run of the first configuration, on either side, ran on a busy
        machine: its figures are shown, no difference is called significant."""
        return self.rows[0].get("trusted") if self.rows else None

    def __repr__(self) -> str:
        # The headline beside the sides: what a notebook cell showing it is for.
        ratio = self.throughput_ratio
        shown = f"{ratio:.3f}" if isinstance(ratio, float) else ratio
        return (
            f"Comparison(a={self.a!r}, b={self.b!r}, throughput_ratio={shown}, "
            f"significant={self.significant}, configurations={len(self.rows)}, "
            f"unmatched={self.unmatched!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale compare --json` object."""
        return dict(self.data)

    def to_dataframe(self) -> Any:
        """One row per configuration; intervals as `_low`/`_high` columns, run ids joined."""
        rows = [scalar_row(row) for row in self.rows]
        columns = list(dict.fromkeys(key for row in rows for key in row))
        return data_frame(rows, columns)


@dataclass(frozen=True)
class ReportFiles:
    """A report directory as written: open `html`, or show `plots` in a notebook."""

    out: Path
    html: Path
    markdown: Path
    csv: Path
    plots: tuple[Path, ...]
    """One PNG per plot drawn."""
    not_drawn: tuple[str, ...] = ()
    """Plots left out, each 'KIND (WORKLOAD): why'."""
    configurations: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    """report.csv's rows: one per configuration."""
    document: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """`trainscale report --json`'s object."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as `trainscale report --json` prints it: the paths as text, the
        configurations (report.csv's rows), each workload's baseline and Amdahl fit, the
        runs not completed."""
        return dict(self.document)

    def to_dataframe(self) -> Any:
        """report.csv as a DataFrame: one row per configuration."""
        return data_frame(self.configurations, CONFIGURATION_COLUMNS)


@dataclass(frozen=True)
class Recommendation:
    """The fastest setting found on this machine that keeps the serial baseline's accuracy
    (`trainscale recommend`), and how it was found."""

    recommend_id: str
    workload: str
    script: str | None
    """The script searched, or None for a workload."""
    best: str
    """The recommended setting's label, e.g. '2w x 1t compact bf16 b64'."""
    command: str
    """The `trainscale run` command of the best setting (full recipe)."""
    speedup: float | None
    """The best's samples/s over the baseline's, measured in the same rung."""
    samples_per_s: float | None
    baseline_samples_per_s: float | None
    accuracy_checked: bool
    """Whether the finalists' accuracy was compared with the baseline's (not on synthetic
    data, nor for a script without `check_accuracy`)."""
    best_accuracy: float | None
    baseline_accuracy: float | None
    trusted: bool
    """False where every throughput trial ran on a busy machine, so the ranking rests on
    them."""
    accuracy_failed: bool
    """A script's accuracy check could not be made: the baseline's whole run failed (the
    CLI's exit status 1)."""
    notes: tuple[str, ...] = field(repr=False)
    """What the user should know: budget stops, rejections, a global batch that differs."""
    setting: Mapping[str, Any] = field(repr=False)
    """The best setting's workers, threads, affinity, precision, batch and core sets."""
    ranking: tuple[Mapping[str, Any], ...] = field(repr=False)
    """Every candidate measured, best first: label, the rung it reached, samples/s there."""
    runs: StoredRuns = field(repr=False)
    """Every trial run, as stored (tag recommend:<id>), in the order they ran."""
    data: Mapping[str, Any] = field(repr=False, compare=False)
    """The `trainscale recommend --json` object."""

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale recommend --json` object."""
        return dict(self.data)

    def to_dataframe(self) -> Any:
        """One row per candidate measured, best first: label, rung, samples_per_s."""
        return data_frame(self.ranking, ("label", "rung", "samples_per_s"))


PREDICTION_COLUMNS = (
    "workers",
    "nodes",
    "per_worker_batch",
    "global_batch",
    "algorithm",
    "step_time_s",
    "step_time_s_mean",
    "samples_per_s",
    "speedup",
    "efficiency",
    "data_s",
    "forward_s",
    "backward_s",
    "optimizer_s",
    "comm_s",
    "exposed_comm_s",
    "exposed_comm_share",
    "straggler_s",
    "num_buckets",
)
"""The DataFrame columns of a scaling prediction, one row per worker count."""


@dataclass(frozen=True)
class ScalingPrediction:
    """Predicted steps of a workload on a cluster, one per worker count (`trainscale
    simulate`): a prediction from stored runs, probes or a cluster file, not a measurement."""

    workload: str
    cluster: str
    """The cluster's name: a preset's, a file's, or 'local'."""
    device: str
    calibration: str
    """Where a worker's compute came from: 'runs' (measured here), 'workloads' (rates
    fitted to other workloads' runs on the device) or 'peak' (the device's peak FLOP/s x an
    efficiency)."""
    points: tuple[Mapping[str, Any], ...] = field(repr=False)
    """One per worker count: step time (median and mean over the sampled stragglers),
    samples/s, speedup and efficiency against the first count, the step's parts."""
    plots: tuple[Path, ...] = ()
    """The PNG plots written (with `plot=DIR`)."""
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The `trainscale simulate --json` object: the cluster, the calibration, the gradient
    buckets and the predictions."""

    @property
    def speedups(self) -> dict[int, float | None]:
        """Predicted speedup per worker count."""
        return {int(point["workers"]): point.get("speedup") for point in self.points}

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale simulate --json` object."""
        return dict(self.data)

    def to_dataframe(self) -> Any:
        """One row per worker count: `PREDICTION_COLUMNS`."""
        return data_frame(self.points, PREDICTION_COLUMNS)


@dataclass(frozen=True)
class Emulation:
    """What N workers cost in accuracy (`trainscale emulate`): one stored run per worker
    count, trained in one process as N workers would optimise."""

    emulation_id: str
    workload: str
    mode: str
    """'sync', 'async' or 'local-sgd'."""
    report_command: str
    """The `trainscale report` command of these runs."""
    points: tuple[Mapping[str, Any], ...] = field(repr=False)
    """Per worker count: `run_id`, `workers`, `global_batch_size`, `lr`, `test_accuracy`,
    `steps_to_target`, `samples_to_target`, `accuracy_by_epoch`, the mode's own figures."""
    runs: StoredRuns = field(repr=False)
    """The runs, as stored (tag emulate:<id>), in the order they trained."""
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The `trainscale emulate --json` object."""

    @property
    def accuracy(self) -> dict[int, float | None]:
        """Final test accuracy per worker count."""
        return {int(point["workers"]): point.get("test_accuracy") for point in self.points}

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale emulate --json` object."""
        return dict(self.data)

    def to_dataframe(self) -> Any:
        """One row per worker count, its figures as columns (the accuracy by epoch joined
        into one cell; the curve of steps left out)."""
        rows = [scalar_row({k: v for k, v in p.items() if k != "steps_curve"}) for p in self.points]
        columns = list(dict.fromkeys(key for row in rows for key in row))
        return data_frame(rows, columns)


TIME_TO_ACCURACY_COLUMNS = (
    "run_id",
    "mode",
    "workers",
    "global_batch_size",
    "per_worker_batch_size",
    "local_steps",
    "steps_to_target",
    "samples_to_target",
    "target_accuracy",
    "step_time_s",
    "time_to_target_s",
    "device_seconds",
)
"""The DataFrame columns of a time-to-accuracy prediction, one row per emulated setting."""


@dataclass(frozen=True)
class TimeToAccuracy:
    """Predicted time to the target accuracy on a cluster (`trainscale
    predict-time-to-accuracy`): per emulated setting, its emulated steps to the target
    times the predicted time per step."""

    workload: str
    cluster: str
    calibration: str
    """Where a worker's compute came from: 'runs', 'workloads' or 'peak'."""
    points: tuple[Mapping[str, Any], ...] = field(repr=False)
    """One per emulated setting: mode, workers, batch, steps to target (emulated), step time
    and time to target (predicted), device-seconds."""
    best_by_mode: Mapping[str, Mapping[str, Any]] = field(repr=False)
    """Per mode: the fastest worker count, its time, and the counts beyond it that are
    slower."""
    plots: tuple[Path, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The `trainscale predict-time-to-accuracy --json` object."""

    def to_dict(self) -> dict[str, Any]:
        """The `trainscale predict-time-to-accuracy --json` object."""
        return dict(self.data)

    def to_dataframe(self) -> Any:
        """One row per emulated setting: `TIME_TO_ACCURACY_COLUMNS`."""
        return data_frame(self.points, TIME_TO_ACCURACY_COLUMNS)
