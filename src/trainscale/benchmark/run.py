"""The bench, end to end: check everything, measure every rung, tabulate, write the table.

`run_bench` is what `trainscale bench` calls; it returns a `BenchResult` and reports its
progress to a `BenchListener` (the CLI prints it, a Python caller may pass its own or none).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainscale.benchmark.ladder import Rung, Skipped, plan_ladder, rotation
from trainscale.benchmark.table import RungResult, markdown_table, pitfall_comparisons, table_rows
from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError, TrainscaleError
from trainscale.frameworks import get_framework, require
from trainscale.metrics.paired import FEW_ROUNDS
from trainscale.runner.data_choice import DataChoice, prepare_real

DEFAULT_STEPS = 100
"""Training steps of a throughput rung, over all its rounds."""
QUICK_STEPS = 30
"""Training steps of a throughput rung with `quick`, over all its rounds."""
DEFAULT_ROUNDS = 5
"""Rounds of the ladder: every rung runs once a round, DEFAULT_STEPS / rounds steps a run."""
QUICK_ROUNDS = 2
"""Rounds of the ladder with `quick`."""
DEFAULT_OUT = "trainscale-bench.md"
"""Where the Markdown table is written by default."""


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
    global_batch_size: int
    rounds: int = 1
    """Rounds of the ladder: every rung once a round, in rotated order."""
    data_note: str | None = None
    """Why the bench measured synthetic data although real data was wanted, or None."""
    data_missing: str | None = None
    """Where the real data was looked for, when it was not found."""
    results: list[RungResult] = field(default_factory=list)
    out: Path | None = None
    """The Markdown file written, or None."""

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
    def pitfall_lines(self) -> list[str]:
        """Each sound setting against its naive pitfall, paired over the rounds, as a line."""
        return [
            f"{p.b} vs {p.a}: {p.text()} ({p.rounds_note}): "
            + (
                p.verdict_against("the naive setting")
                if p.median is not None
                # A round drops out of a pair when either run failed or ran on a busy machine.
                else "cannot tell: no round measured both on a quiet machine"
            )
            for p in pitfall_comparisons(self.results)
        ]

    @property
    def all_failed(self) -> bool:
        """Every run of every rung failed (partial failures are in the table and the store)."""
        ran = [r for r in self.results if not isinstance(r.rung, Skipped)]
        return bool(ran) and not any(r.completed for r in ran)

    def markdown(self) -> str:
        """The Markdown file: the machine, the rules of the measurement, and the table."""
        env, base = self.env, self.options
        lines = [
            f"# trainscale bench {self.bench_id}: {self.workload}",
            "",
            f"Machine: {env['cpu_model']}, {len(env['usable_cores'])} usable cores, "
            f"torch {env['torch_version']}, bf16 native: {env['bf16_native']}. "
            f"Data: {base.data.kind}. Global batch {self.global_batch_size} on every rung; "
            f"throughput rungs train {self.steps} steps in {self.rounds} round(s) of "
            f"{self.steps_per_run} steps a run ({base.measurement.warmup_steps_untimed} "
            "warm-up steps a run untimed), every rung once a round, the order rotated from "
            "round to round. samples/s and step ms are medians over the rounds. Speedup is "
            "against the serial 1-core run of the same round: the median over rounds of the "
            "ratio within each round, with its 95% bootstrap interval over rounds; the "
            "verdict says faster or slower only where the interval excludes 1. "
            "Efficiency = speedup / cores given.",
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
        if self.pitfall_lines:
            lines += [f"- {line}" for line in self.pitfall_lines] + [""]
        lines += [
            f"Runs are stored with tag `bench:{self.bench_id}` "
            f"(`trainscale runs list --tag bench:{self.bench_id}`).",
            "",
        ]
        return "\n".join(lines)


def bench_steps(steps: int | None, quick: bool) -> int:
    """Steps of a throughput rung: `steps` (a whole number >= 1), else the default."""
    if steps is not None and steps < 1:
        raise ConfigError(f"--steps must be a whole number >= 1, got {steps}")
    return steps if steps is not None else (QUICK_STEPS if quick else DEFAULT_STEPS)


def bench_rounds(rounds: int | None, quick: bool, steps: int) -> int:
    """Rounds of the ladder: `rounds` (a whole number from 1 to `steps`), else the default
    (never more rounds than steps)."""
    if rounds is None:
        return min(steps, QUICK_ROUNDS if quick else DEFAULT_ROUNDS)
    if rounds < 1:
        raise ConfigError(f"--rounds must be a whole number >= 1, got {rounds}")
    if rounds > steps:
        raise ConfigError(
            f"--rounds {rounds} is more than the {steps} steps a rung trains: every round "
            "runs each rung for at least one step"
        )
    return rounds


def steps_per_run(steps: int, rounds: int) -> int:
    """Steps of one rung's run in one round: the rung's steps split over the rounds."""
    return -(-steps // rounds)


def choose_data(base: RunOptions, data: DataChoice) -> tuple[RunOptions, str | None, str | None]:
    """Real data when it can be found; synthetic (with a loud note) otherwise. Either way
    the run is prepared (resolved, data sized, batch and memory checked) before any rung.

    Returns (options, note, missing): the note says synthetic data is measured and how to
    give the real data; `missing` is where the data was looked for (None with real data or
    when synthetic data was asked for)."""
    from trainscale.runner.resolve import prepare

    if data != "synthetic":
        config, missing = prepare_real(base, data)
        if config is not None:
            return base.with_(data_dir=config.data.data_dir), None, None
        note = synthetic_note(base.workload)
    else:
        note, missing = None, None
    synthetic = base.with_(data="synthetic")
    prepare(synthetic)
    return synthetic, note, missing


def synthetic_note(workload: str) -> str:
    """The first line a bench without real data prints: what it measures instead, and the
    two ways to give it the data. Short, so it reads whole on an 80-column terminal."""
    return (
        "REAL DATA NOT FOUND, measuring on SYNTHETIC data (throughput only); real "
        f"{workload} data: --data-dir DIR or TRAINSCALE_DATA_DIR=DIR"
    )


def run_bench(
    workload: str = "mnist-cnn",
    *,
    framework: str = "pytorch",
    data: DataChoice = "auto",
    data_dir: str | None = None,
    download: bool = True,
    steps: int | None = None,
    rounds: int | None = None,
    quick: bool = False,
    store: str | Path | None = None,
    out: str | Path | None = DEFAULT_OUT,
    listener: BenchListener | None = None,
) -> BenchResult:
    """Measure the ladder of settings for `workload` on this machine, store every run.

    Everything a user can get wrong (the workload, `steps`, `rounds`, `out`, the store, the
    data) fails before the first rung. Each rung trains `steps` steps (default 100, `quick`
    30) at the recipe's global batch, split over `rounds` rounds (default 5, `quick` 2):
    every round runs each rung once, back to back, starting at rung r mod n in round r, and
    each run is stored with its round as its `repeat_index`. Speedups are paired within
    rounds (`metrics.paired`). Then, unless `quick` or on synthetic data, the setting with
    the highest median throughput over the rounds (the pitfall aside) trains the full recipe
    for accuracy. A run that fails is stored as failed and in the table. The Markdown table
    is written to `out` (None: not written). `framework` trains every rung (docs/frameworks.md).
    """
    from trainscale.hardware.facts import collect_environment
    from trainscale.results.outputs import check_out_file, write_atomically
    from trainscale.results.store import RunStore, default_store_path
    from trainscale.runner.launch import RunFailed, execute_run
    from trainscale.workloads import get_workload

    listener = listener or BenchListener()
    spec = get_workload(workload)
    workload = spec.name  # a custom workload's reference, from here on its name
    require(framework)  # every rung needs it: one line now, not a table of failed rungs
    steps = bench_steps(steps, quick)
    rounds = bench_rounds(rounds, quick, steps)
    out_path = Path(out) if out is not None else None
    if out_path is not None:
        check_out_file(out_path)
    store_path = store or default_store_path()
    # Every rung writes to the store: one that cannot be used fails now, in one line, not
    # once per rung with a table of failures written anyway.
    RunStore(store_path).close()
    env = collect_environment()
    bench_id = uuid.uuid4().hex[:8]
    base = RunOptions.of(
        workload=spec.name,
        framework=framework,
        data_dir=data_dir,
        download=download,
        steps=steps_per_run(steps, rounds),
        # Same global batch on every rung: the same optimisation, so speedups are fair.
        global_batch_size=spec.recipe.batch_size,
        # Rungs name their precision: fp32, and bf16 on its own rung where it is native.
        precision="fp32",
        evaluate=False,
        tag=f"bench:{bench_id}",
    )
    base, data_note, data_missing = choose_data(base, data)
    if data_note:
        listener.data_note(data_note)
    result = BenchResult(
        bench_id,
        spec.name,
        env,
        base,
        steps,
        spec.recipe.batch_size,
        rounds,
        data_note,
        data_missing,
    )
    ladder = plan_ladder(base, len(env["usable_cores"]), bool(env["bf16_native"]), len(env["gpus"]))
    result.results = [RungResult(rung) for rung in ladder]
    measured = [r for r in result.results if not isinstance(r.rung, Skipped)]
    listener.started(result, len(measured))

    def measure(item: RungResult, round_index: int | None) -> str | None:
        """Run `item`'s rung, record it; the error of a run that failed (stored as failed)."""
        assert isinstance(item.rung, Rung)
        try:
            # Each rung must be able to divide the global batch among its workers.
            item.runs.append(execute_run(item.rung.options, store_path, repeat_index=round_index))
            return None
        except (RunFailed, TrainscaleError) as error:
            item.runs.append(None)
            item.errors.append(str(error))
            return str(error)

    index = 0
    for round_index, order in enumerate(rotation(measured, rounds)):
        listener.round_started(round_index + 1, rounds, [item.rung for item in order])
        for item in order:
            index += 1
            listener.rung_started(index, rounds * len(measured), item.rung)
            error = measure(item, round_index)
            if error is not None:
                listener.rung_failed(item.rung, error)
    if not quick and base.data.kind == "real":
        finished = [r for r in measured if r.completed and not r.rung.pitfall]
        if finished:
            best = max(finished, key=lambda r: r.samples_per_s or 0.0)
            full = Rung(
                f"{best.rung.name}, full recipe ({spec.recipe.epochs:g} epoch)",
                best.rung.options.with_(steps=None, evaluate=True),
                cores=best.rung.cores,
                note="accuracy run: fastest setting above",
            )
            listener.full_recipe_started(best.rung)
            accuracy = RungResult(full, in_rounds=False)
            result.results.append(accuracy)
            measure(accuracy, None)
    if out_path is not None:
        text = result.markdown()
        write_atomically(out_path, lambda handle: handle.write(text))
        result.out = out_path
    return result
