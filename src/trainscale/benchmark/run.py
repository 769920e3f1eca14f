"""The bench, end to end: check everything, measure every rung, tabulate, write the table.

`run_bench` is what `trainscale bench` calls; it returns a `BenchResult` and reports its
progress to a `BenchListener` (the CLI prints it, a Python caller may pass its own or none).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainscale.benchmark.ladder import Rung, Skipped, plan_ladder, round_order
from trainscale.benchmark.options import (
    DEFAULT_ROUNDS,
    DEFAULT_STEPS,
    QUICK_ROUNDS,
    QUICK_STEPS,
    BenchOptions,
)
from trainscale.benchmark.script_target import ScriptTarget, batch_text
from trainscale.benchmark.table import (
    RungResult,
    baseline_lines,
    gpu_lines,
    markdown_table,
    pitfall_comparisons,
    quiet_rounds,
    speedups,
    table_rows,
)
from trainscale.config.limits import MAX_STEPS, check_count
from trainscale.config.options import MeasurementOptions, RunOptions
from trainscale.errors import ConfigError, DataNotFound, TrainscaleError
from trainscale.frameworks import get_framework, require
from trainscale.hardware.contention import OtherProcess
from trainscale.hardware.facts import gpus_text
from trainscale.metrics.paired import FEW_ROUNDS
from trainscale.metrics.run_flags import ran_busy
from trainscale.results.outputs import check_out_file, write_atomically
from trainscale.results.store import RunStore, default_store_path
from trainscale.runner.data_choice import DataChoice, prepare_real

if TYPE_CHECKING:
    from trainscale.workloads.base import Workload

DEFAULT_OUT = "trainscale-bench.md"
"""Where the Markdown table is written by default."""
BUSY_HINT = "stop it, or run the bench again when the machine is quiet"
"""What to do about other work on the cores (said where a busy round is measured again,
and under a table whose ratios are not trusted)."""


class BenchListener:
    """What a bench reports as it goes; the CLI prints it, a silent caller ignores it."""

    def data_note(self, note: str) -> None:
        """Real data was asked for (auto) but not found: the bench measures synthetic data."""

    def started(self, result: BenchResult, runnable: int) -> None:
        """The ladder is planned: `runnable` of its rungs will run."""

    def round_started(self, index: int, rounds: int, order: list[Rung]) -> None:
        """Round `index` (from 1) of `rounds` starts; its rungs run in `order`."""

    def rung_started(self, index: int, total: int, rung: Rung) -> None:
        """Run `index` (from 1) of `total` (rungs x rounds) starts: `rung`'s in this round."""

    def rung_failed(self, rung: Rung, error: str) -> None:
        """A rung's run failed in a round (it is stored as failed; the bench goes on)."""

    def busy_round(self, result: BenchResult, busiest: list[OtherProcess], again: bool) -> None:
        """The last round had a run on a busy machine: `busiest` are the other processes
        using the most CPU just after it, and `again` says whether another round is measured
        to replace it (`result.extra_rounds` counts those added so far)."""

    def full_recipe_started(self, fastest: Rung) -> None:
        """The accuracy run starts, on the fastest setting."""


@dataclass
class BenchResult:
    """What a bench measured, and where its table went."""

    bench_id: str
    workload: str
    env: dict[str, Any]
    """This machine's facts (`system.collect_environment`)."""
    options: RunOptions
    """The options every rung starts from (the data chosen, the steps, the tag)."""
    steps: int
    """Training steps of a throughput rung over all its rounds."""
    global_batch_size: int | None
    """Every rung's global batch; None for a script, which decides its own."""
    rounds: int = 1
    """Rounds of the ladder: every rung once a round, in rotated order."""
    data_note: str | None = None
    """Why the bench measured synthetic data although real data was wanted, or None."""
    data_missing: str | None = None
    """Where the real data was looked for, when it was not found."""
    results: list[RungResult] = field(default_factory=list)
    out: Path | None = None
    """The Markdown file written, or None."""
    max_extra_rounds: int = 0
    """Most rounds added to replace rounds with a run on a busy machine."""
    extra_rounds: int = 0
    """Rounds added (each rung once more) because a round had a run on a busy machine."""
    busiest: list[OtherProcess] = field(default_factory=list)
    """The other processes that used the most CPU after the last busy round."""
    script: ScriptTarget | None = None
    """The user's script the rungs run, with its arguments (None: a workload)."""

    @property
    def batch_text(self) -> str:
        """'global batch 64' for the progress line; a script's is its own."""
        if self.global_batch_size is not None:
            return f"global batch {self.global_batch_size}"
        return "the script's own global batch"

    @property
    def batch_sentence(self) -> str:
        """The Markdown's word on the global batch: the same on every rung, or a script's
        own as its rungs measured it (each run stopped by the meter after its steps)."""
        if self.global_batch_size is not None:
            return f"Global batch {self.global_batch_size} on every rung"
        sizes = [run["global_batch_size"] for item in self.results for run in item.completed]
        return (
            f"Global batch: {batch_text(sizes)}; each run of the script stopped by the meter "
            "after its steps"
        )

    @property
    def in_framework(self) -> str:
        """' in TensorFlow' (the framework every rung trains with); '' for PyTorch."""
        framework = self.options.parallel.framework
        return "" if framework == "pytorch" else f" in {get_framework(framework).label}"

    @property
    def title(self) -> str:
        return (
            f"trainscale bench {self.bench_id}: {self.workload}{self.in_framework} on "
            f"{self.env['cpu_model']}"
        )

    @property
    def rows(self) -> list[dict[str, str]]:
        """The table's rows (`bench.table.table_rows`)."""
        return table_rows(self.results)

    @property
    def steps_per_run(self) -> int:
        """Training steps of one rung's run in one round."""
        return steps_per_run(self.steps, self.rounds)

    @property
    def quiet_rounds(self) -> int:
        """Rounds measured with no run on a busy machine."""
        return quiet_rounds(self.results)

    def busy_round_line(self, busiest: list[OtherProcess], again: bool) -> str:
        """The line a listener prints after a round with a busy run: the quiet rounds so
        far, what used the cores, and whether a round is measured again."""
        neighbours = ", ".join(p.text() for p in busiest) or "no single process stands out"
        text = (
            f"busy machine: other work used the cores ({neighbours}); {self.quiet_rounds} of "
            f"{self.rounds} rounds quiet so far"
        )
        if not again:
            return text
        return (
            f"{text}: measuring one more round ({self.extra_rounds} of at most "
            f"{self.max_extra_rounds} extra); {BUSY_HINT}"
        )

    @property
    def gpu_sentence(self) -> str:
        """The Markdown's word on the GPU settings, where the machine has GPUs: what they
        train, and what they are compared with; '' without GPUs."""
        if not self.env.get("gpus"):
            return ""
        what = (
            "run the script in its own global batch and precision"
            if self.script is not None
            else "train the same global batch (the same recipe)"
        )
        return (
            f" GPU settings {what} and are compared, paired the same way, with the fastest "
            "CPU setting."
        )

    @property
    def baseline_lines(self) -> list[str]:
        """Which baseline the speedups answer, and each setting against 1 process x all
        cores as threads (`bench.table.baseline_lines`)."""
        return baseline_lines(self.results)

    @property
    def gpu_lines(self) -> list[str]:
        """Each GPU setting against the fastest CPU setting, paired over the rounds, as a
        line with its verdict (`bench.table.gpu_lines`); [] without GPUs."""
        return gpu_lines(self.results)

    @property
    def pitfall_lines(self) -> list[str]:
        """Each sound setting against its naive pitfall, paired over the rounds, as a line."""
        return [
            f"{p.b} vs {p.a}: {p.text()} ({p.rounds_note}): "
            + (
                p.verdict_against("the naive setting")
                if p.median is not None
                # A round drops out of a pair when either run failed.
                else "cannot tell: no round measured both"
            )
            for p in pitfall_comparisons(self.results)
        ]

    @property
    def busy_lines(self) -> list[str]:
        """What busy rounds did to the table, and what to do: [] on a quiet machine."""
        if not any(r.busy_runs for r in self.results):
            return []
        total = self.rounds + self.extra_rounds
        lines = [
            f"busy machine: {total - self.quiet_rounds} of {total} round(s) had a run that "
            "shared its cores with other work"
            + (f" ({self.extra_rounds} extra round(s) measured)" if self.extra_rounds else "")
            + "; each speedup leaves them out while quiet rounds remain"
        ]
        untrusted = [name for name, p in speedups(self.results).items() if not p.trusted]
        untrusted += [p.b for p in pitfall_comparisons(self.results) if not p.trusted]
        if untrusted:
            names = ", ".join(dict.fromkeys(untrusted))
            neighbours = ", ".join(p.text() for p in self.busiest) or "other processes"
            lines.append(
                f"not trusted (a busy run in every round): {names}; their ratios are shown "
                f"as measured. Using the cores: {neighbours}: {BUSY_HINT} "
                f"(--rounds {max(self.rounds, FEW_ROUNDS)})"
            )
        return lines

    @property
    def all_failed(self) -> bool:
        """Every run of every rung failed (partial failures are in the table and the store)."""
        ran = [r for r in self.results if not isinstance(r.rung, Skipped)]
        return bool(ran) and not any(r.completed for r in ran)

    def _rounds_text(self) -> str:
        """The rounds measured: those planned, and any added for busy ones."""
        added = f", and {self.extra_rounds} more for busy ones" if self.extra_rounds else ""
        return f"{self.rounds} round(s){added}"

    def markdown(self) -> str:
        """The Markdown file: the machine, the rules of the measurement, and the table."""
        env, base = self.env, self.options
        lines = [
            f"# trainscale bench {self.bench_id}: {self.workload}",
            "",
            f"Machine: {env['cpu_model']}, {len(env['usable_cores'])} usable cores, "
            f"torch {env['torch_version']}, bf16 native: {env['bf16_native']}"
            f"{gpus_text(env)}. "
            f"Data: {base.data.kind}. {self.batch_sentence}; "
            f"throughput rungs train {self.steps_per_run} steps a run ({warmup_text(base)}), "
            f"every rung once a round in {self._rounds_text()} (--steps {self.steps} split "
            "over the planned rounds, rounded up), the order rotated from round to round. "
            "samples/s and step ms are medians over the rounds. Speedup is "
            "against the serial 1-core run of the same round: the median over rounds of the "
            "ratio within each round, with its 95% bootstrap interval over rounds; the "
            "verdict says faster or slower only where the interval excludes 1. "
            "Efficiency = speedup / cores given." + self.gpu_sentence,
            "",
        ]
        if self.rounds < FEW_ROUNDS:
            lines += [
                f"{self.rounds} round(s): with fewer than {FEW_ROUNDS} rounds the interval "
                "is wide (use --rounds to narrow it).",
                "",
            ]
        if self.data_note:
            lines += [f"**{self.data_note}**", ""]
            if self.data_missing:
                lines += [f"Where the data was looked for: {self.data_missing}", ""]
        lines += [markdown_table(self.rows), ""]
        lines += [f"- {line}" for line in self.baseline_lines] + [""]
        if self.gpu_lines:
            lines += [f"- {line}" for line in self.gpu_lines] + [""]
        if self.pitfall_lines:
            lines += [f"- {line}" for line in self.pitfall_lines] + [""]
        if self.busy_lines:
            lines += [f"**{line}**" for line in self.busy_lines] + [""]
        lines += [
            f"Runs are stored with tag `bench:{self.bench_id}` "
            f"(`trainscale runs list --tag bench:{self.bench_id}`; a report of them, paired "
            f"by round: `trainscale report --tag bench:{self.bench_id} --out DIR`).",
            "",
        ]
        return "\n".join(lines)


def warmup_text(base: RunOptions) -> str:
    """How many of a bench run's steps are untimed, and why fewer than usual."""
    warmup, usual = base.measurement.warmup_steps_untimed, MeasurementOptions().warmup_steps_untimed
    text = f"{warmup} warm-up step{'' if warmup == 1 else 's'} a run untimed"
    if warmup < usual:
        text += f", fewer than the usual {usual} so that each run times at least one step"
    return text


MIN_RUN_STEPS = 2
"""Steps of the shortest run a round makes of a rung: its first step pays the run's one-off
costs and is not timed, the next is (a run of one step would time its set-up)."""

MAX_ROUNDS = 10_000
"""Most rounds, planned or added: every round runs every rung once, a few seconds each at
least; more is a typo."""


def bench_steps(steps: int | None, quick: bool) -> int:
    """Steps of a throughput rung: `steps` (a whole number from `MIN_RUN_STEPS` to
    `MAX_STEPS`), else the default."""
    if steps is None:
        return QUICK_STEPS if quick else DEFAULT_STEPS
    if steps < MIN_RUN_STEPS:
        raise ConfigError(
            f"--steps must be at least {MIN_RUN_STEPS} (a run's first step pays its one-off "
            f"costs and is not timed), got {steps}"
        )
    check_count("--steps", steps, MIN_RUN_STEPS, MAX_STEPS, "steps of one rung")
    return steps


def bench_rounds(rounds: int | None, quick: bool, steps: int) -> int:
    """Rounds of the ladder: `rounds` (a whole number, at most as many as leave each round's
    run `MIN_RUN_STEPS` steps), else the default (as many as do, up to the usual number)."""
    # A run trains its round's share of the steps rounded up: two or more while rounds < steps.
    most = max(1, min(steps - (MIN_RUN_STEPS - 1), MAX_ROUNDS))
    if rounds is None:
        return min(most, QUICK_ROUNDS if quick else DEFAULT_ROUNDS)
    if rounds < 1:
        raise ConfigError(f"--rounds must be a whole number >= 1, got {rounds}")
    if rounds > most:
        raise ConfigError(
            f"--rounds {rounds} is more than the {steps} steps a rung trains allow: each "
            f"round's run needs {MIN_RUN_STEPS} steps (one untimed, one timed); give at most "
            f"--rounds {most}, or more --steps"
        )
    return rounds


def bench_extra_rounds(max_extra_rounds: int | None, rounds: int) -> int:
    """Most rounds added to replace busy ones: `max_extra_rounds` (a whole number >= 0, the
    rounds in all at most `MAX_ROUNDS`), else as many as the rounds planned (a busy machine
    at most doubles the bench)."""
    if max_extra_rounds is None:
        return rounds
    if max_extra_rounds < 0:
        raise ConfigError(f"--max-extra-rounds must be a whole number >= 0, got {max_extra_rounds}")
    most = MAX_ROUNDS - rounds
    check_count("--max-extra-rounds", max_extra_rounds, 0, most, f"{MAX_ROUNDS:,} rounds in all")
    return max_extra_rounds


def steps_per_run(steps: int, rounds: int) -> int:
    """Steps of one rung's run in one round: the rung's steps split over the rounds."""
    return -(-steps // rounds)


def bench_warmup_steps(run_steps: int) -> int:
    """Untimed warm-up steps of a bench run of `run_steps` steps: the usual number, or fewer
    so that at least one step is timed. (A run no longer than its warm-up would time every
    step, the first one's one-off costs included: a rung's set-up in its throughput.)"""
    usual = MeasurementOptions().warmup_steps_untimed
    return min(usual, max(0, run_steps - 1))


def choose_data(base: RunOptions, data: DataChoice) -> tuple[RunOptions, str | None, str | None]:
    """Real data when it can be found; synthetic (with a loud note) otherwise. Either way
    the run is prepared (resolved, data sized, batch and memory checked) before any rung.

    Returns (options, note, missing): the note says synthetic data is measured and how to
    give the real data; `missing` is where the data was looked for (None with real data or
    when synthetic data was asked for)."""
    from trainscale.runner.resolve import prepare

    if data != "synthetic":
        config, error = prepare_real(base, data)
        if config is not None:
            return base.with_(data_dir=config.data.data_dir), None, None
        missing = str(error)
        # Files found but damaged are not "not found": the one line says what is wrong.
        note = synthetic_note(base.workload, None if isinstance(error, DataNotFound) else missing)
    else:
        note, missing = None, None
    synthetic = base.with_(data="synthetic")
    prepare(synthetic)
    return synthetic, note, missing


def synthetic_note(workload: str, unreadable: str | None = None) -> str:
    """The first line a bench without real data prints: what it measures instead, and the
    two ways to give it the data. Short, so it reads whole on an 80-column terminal; where
    the data was found but cannot be read (`unreadable`: why), that reason instead."""
    if unreadable is not None:
        return f"REAL DATA UNREADABLE ({unreadable}), measuring on SYNTHETIC data (throughput only)"
    return (
        "REAL DATA NOT FOUND, measuring on SYNTHETIC data (throughput only); real "
        f"{workload} data: --data-dir DIR or TRAINSCALE_DATA_DIR=DIR"
    )


def full_name(spec: Workload | None) -> str:
    """The accuracy run's name: the workload's full recipe, or a script's whole run."""
    if spec is None:
        return "the whole script"
    return f"full recipe ({spec.recipe.epochs:g} epoch)"


def workload_base(
    spec: Workload,
    framework: str,
    data: DataChoice,
    data_dir: str | None,
    download: bool,
    steps: int,
    bench_id: str,
) -> tuple[RunOptions, str | None, str | None]:
    """The options every rung of a workload's bench starts from (`steps` a run), with the
    data chosen (`choose_data`: options, note, missing)."""
    base = RunOptions.of(
        workload=spec.name,
        framework=framework,
        data_dir=data_dir,
        download=download,
        steps=steps,
        # Same global batch on every rung: the same optimisation, so speedups are fair.
        global_batch_size=spec.recipe.batch_size,
        # Rungs name their precision: fp32, and bf16 on its own rung where it is native.
        precision="fp32",
        evaluate=False,
        tag=f"bench:{bench_id}",
    )
    return choose_data(base, data)


def run_bench(
    workload: str = "mnist-cnn",
    *,
    options: BenchOptions | None = None,
    framework: str = "pytorch",
    data: DataChoice = "auto",
    data_dir: str | None = None,
    download: bool = True,
    store: str | Path | None = None,
    out: str | Path | None = DEFAULT_OUT,
    listener: BenchListener | None = None,
    script: str | os.PathLike[str] | None = None,
    script_args: Sequence[str] = (),
) -> BenchResult:
    """Measure the ladder of settings for `workload` on this machine, store every run.

    Everything a user can get wrong (the workload, the options, `out`, the store, the data)
    fails before the first rung. Each rung trains `options.steps` steps (default 100,
    `quick` 30) at the recipe's global batch, split over `options.rounds` rounds (default
    5, `quick` 2):
    every round runs each rung once, back to back, starting at rung r mod n in round r, and
    each run is stored with its round as its `repeat_index`. Speedups are paired within
    rounds (`metrics.paired`). A round with a run on a busy machine (other work on its
    cores) is measured again, every rung once more, until as many rounds as planned are
    quiet or `max_extra_rounds` rounds were added (default: as many as `rounds`; 0: never);
    the listener hears each one with the busiest other processes. Then, unless `quick` or on
    synthetic data, the setting with the highest median throughput over the rounds (on a
    quiet machine where it was measured on one; the pitfall aside) trains the full recipe
    for accuracy. A run that fails is stored as failed and in the table. The Markdown table
    is written to `out` (None: not written). `framework` trains every rung (docs/frameworks.md).

    `script` (instead of `workload`) benches a user's own training script with its
    `script_args`: every rung is a script run at the script's own global batch, stopped by
    the meter after the rung's steps (the whole script for the accuracy run), the GPU
    settings too where there are GPUs (script runs with device cuda, one worker per GPU),
    all in the script's own precision; `framework`, `data_dir` and `download` are refused
    (docs/own-scripts.md).
    """
    from trainscale.benchmark.script_bench import measure_script, script_base
    from trainscale.hardware.facts import collect_environment
    from trainscale.hardware.precision_choice import gpus_bf16_native
    from trainscale.runner.launch import RunFailed, execute_run, local_result
    from trainscale.workloads import get_workload

    listener = listener or BenchListener()
    target = None if script is None else ScriptTarget(os.fspath(script), tuple(script_args))
    spec = None if target is not None else get_workload(workload)
    if target is None:
        require(framework)  # every rung needs it: one line now, not a table of failed rungs
    options = options or BenchOptions()
    quick = options.quick
    steps = bench_steps(options.steps, quick)
    rounds = bench_rounds(options.rounds, quick, steps)
    max_extra = bench_extra_rounds(options.max_extra_rounds, rounds)
    out_path = Path(out) if out is not None else None
    if out_path is not None:
        check_out_file(out_path)
    env = collect_environment()
    bench_id = uuid.uuid4().hex[:8]
    data_note = data_missing = None
    if target is not None:
        name, batch = target.name, None  # the script decides its batch
        base = script_base(
            target,
            data,
            f"bench:{bench_id}",
            framework=framework,
            data_dir=data_dir,
            download=download,
        )
    else:
        assert spec is not None
        name, batch = spec.name, spec.recipe.batch_size
        base, data_note, data_missing = workload_base(
            spec, framework, data, data_dir, download, steps_per_run(steps, rounds), bench_id
        )
    # Every rung writes to the store: one that cannot be used fails now, in one line, not
    # once per rung with a table of failures written anyway; and only once the options are
    # checked, so that a refused bench leaves no empty store behind.
    store_path = Path(store) if store else default_store_path()
    RunStore(store_path).close()
    # A run of fewer steps than the usual warm-up still times at least one of them.
    base = base.with_(warmup_steps_untimed=bench_warmup_steps(steps_per_run(steps, rounds)))
    if data_note:
        listener.data_note(data_note)
    result = BenchResult(
        bench_id,
        name,
        env,
        base,
        steps,
        batch,
        rounds,
        data_note,
        data_missing,
        max_extra_rounds=max_extra,
        script=target,
    )
    ladder = plan_ladder(
        base,
        len(env["usable_cores"]),
        bool(env["bf16_native"]),
        len(env["gpus"]),
        gpus_bf16_native(env["gpus"]),
        target is not None,  # a script's ladder: every setting in the script's precision
    )
    base_steps = steps_per_run(steps, rounds)
    result.results = [RungResult(rung) for rung in ladder]
    measured = [r for r in result.results if not isinstance(r.rung, Skipped)]
    listener.started(result, len(measured))

    def measure(item: RungResult, round_index: int | None) -> str | None:
        """Run `item`'s rung, record it; the error of a run that failed (stored as failed).
        A script's throughput rung is stopped after the steps a run trains, by the meter;
        its accuracy run (no round) runs the whole script."""
        assert isinstance(item.rung, Rung)
        try:
            if target is not None:
                limit = None if round_index is None else base_steps
                ran = measure_script(target, item.rung.options, store_path, round_index, limit)
            else:
                # Each rung must be able to divide the global batch among its workers.
                options = item.rung.options
                ran = local_result(execute_run(options, store_path, repeat_index=round_index))
            item.runs.append(ran)
            return None
        except (RunFailed, TrainscaleError) as error:
            item.runs.append(None)
            item.errors.append(str(error))
            return str(error)

    index = round_index = 0
    while round_index < rounds + result.extra_rounds:
        order = round_order(measured, round_index)
        total = rounds + result.extra_rounds
        listener.round_started(round_index + 1, total, [item.setting for item in order])
        for item in order:
            index += 1
            listener.rung_started(index, total * len(measured), item.setting)
            error = measure(item, round_index)
            if error is not None:
                listener.rung_failed(item.setting, error)
        round_index += 1
        if any(item.runs[-1] is not None and ran_busy(item.runs[-1]) for item in order):
            from trainscale.hardware.contention import busiest_processes

            result.busiest = busiest_processes()
            # One more round while the rounds left could no longer make as many quiet rounds
            # as planned, up to the most extra rounds allowed.
            left = rounds + result.extra_rounds - round_index
            again = result.quiet_rounds + left < rounds and result.extra_rounds < max_extra
            if again:
                result.extra_rounds += 1
            listener.busy_round(result, result.busiest, again)
    if not quick and base.data.kind == "real":
        usual_warmup = MeasurementOptions().warmup_steps_untimed  # a whole recipe's run
        finished = [r for r in measured if r.completed and not r.setting.pitfall]
        if finished:
            # The fastest on a quiet machine where it was measured on one.
            best = max(finished, key=lambda r: r.quiet_samples_per_s or r.samples_per_s or 0.0)
            full = Rung(
                f"{best.setting.name}, {full_name(spec)}",
                # A script's own length and evaluations; a workload's recipe, evaluated.
                best.setting.options.with_(warmup_steps_untimed=usual_warmup)
                if spec is None
                else best.setting.options.with_(
                    steps=None, evaluate=True, warmup_steps_untimed=usual_warmup
                ),
                cores=best.setting.cores,
                note="accuracy run: fastest setting above",
            )
            listener.full_recipe_started(best.setting)
            accuracy = RungResult(full, in_rounds=False)
            result.results.append(accuracy)
            measure(accuracy, None)
    if out_path is not None:
        text = result.markdown()
        write_atomically(out_path, lambda handle: handle.write(text))
        result.out = out_path
    return result
