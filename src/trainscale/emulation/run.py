"""An emulation, end to end: every worker count checked, each trained in this process and
stored as a run, and the table of what each reached.

`run_emulation` is what `trainscale emulate` calls; it returns an `EmulationResult` and
reports each worker count as it starts to an `EmulationListener`.
"""

from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainscale.config.options import RunConfig, RunOptions
from trainscale.emulation.options import EmulationOptions
from trainscale.errors import TrainscaleError
from trainscale.parallel.interrupts import failure_reason, stop_signal
from trainscale.results.store import RunStore, default_store_path
from trainscale.train.progress import make_progress

if TYPE_CHECKING:
    from trainscale.emulation.engine import EmulationPlan

EMULATED_OPTIONS = (
    "lr_scaling",
    "lr",
    "optimizer",
    "epochs",
    "steps",
    "seed",
    "eval_every",
    "target_accuracy",
    "data",
    "data_dir",
    "download",
    "workload_options",
)
"""The run options that shape an emulation (the others describe real workers): the ones
`run_emulation`'s `options` may set."""


class EmulationListener:
    """What an emulation reports as it goes; the CLI prints it, a silent caller ignores it."""

    def started(
        self, index: int, total: int, spec: Any, config: RunConfig, plan: EmulationPlan
    ) -> None:
        """Worker count `index` (from 1) of `total` starts training: its `EmulationSpec`,
        resolved config and global-step plan."""


@dataclass
class EmulationResult:
    """One stored run per worker count, and what each reached."""

    emulation_id: str
    workload: str
    mode: str
    rows: list[dict[str, Any]]
    """Per worker count: the run id, the emulation's figures (`summary["emulation"]`), the
    final test accuracy, the accuracy by epoch and the time to target."""
    store: str | None = None
    """The store as given (None: the default one), for the report command."""

    @property
    def tag(self) -> str:
        from trainscale.emulation.record import emulation_tag

        return emulation_tag(self.emulation_id)

    @property
    def report_command(self) -> str:
        """The `trainscale report` command of these runs."""
        words = ["trainscale", "report", "--runs", *(r["run_id"][:8] for r in self.rows)]
        words += ["--out", f"emulate-{self.emulation_id}"]
        if self.store:
            words += ["--store", self.store]
        return shlex.join(words)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `trainscale emulate --json` prints."""
        return {
            "emulation_id": self.emulation_id,
            "tag": self.tag,
            "workload": self.workload,
            "mode": self.mode,
            "runs": self.rows,
            "report": self.report_command,
        }

    def table_lines(self) -> list[str]:
        """The results, one line per worker count, under a line about the emulation."""
        first = self.rows[0]
        title = (
            f"emulation {self.emulation_id}: {self.workload}, mode {self.mode}, per-worker "
            f"batch {first['per_worker_batch_size']}, lr scaling {first['lr_scaling']}, target "
            f"accuracy {first['target_accuracy']}"
        )
        if self.mode == "local-sgd":
            title += f", {first['local_steps']} local steps"
        lines = [
            title,
            f"{'N':>4}  {'global batch':>12}  {'lr':>9}  {'final acc':>9}  "
            f"{'steps to target':>15}  {'samples to target':>17}  {'staleness mean/max':>18}  "
            "accuracy by epoch",
        ]
        for row in self.rows:
            staleness = row.get("staleness")
            stale = f"{staleness['mean']:.2f}/{staleness['max']}" if staleness else "-"
            steps = row["steps_to_target"]
            samples = row["samples_to_target"]
            by_epoch = " ".join(f"{a:.4f}" for a in row["accuracy_by_epoch"])
            lines.append(
                f"{row['workers']:>4}  {row['global_batch_size']:>12}  {row['lr']:>9.4g}  "
                f"{row['test_accuracy']:>9.4f}  "
                f"{steps if steps is not None else 'not reached':>15}  "
                f"{samples if samples is not None else '-':>17}  {stale:>18}  {by_epoch}"
            )
        lines.append(
            "global batch = samples per global step (async: one worker's gradient); steps to "
            "target counted at evaluations"
        )
        return lines


class EmulationFailed(TrainscaleError):
    """One worker count's emulation failed (diverged, or the workload's code raised): it is
    stored failed with why, and the counts after it are not run. A failed run, not a
    mistake in what was asked: the command exits 1."""

    def __init__(self, run_id: str, workers: int, reason: str, not_run: list[int]) -> None:
        left = f"; not run: N = {', '.join(map(str, not_run))}" if not_run else ""
        super().__init__(f"emulation run {run_id[:8]} (N = {workers}) failed: {reason}{left}")
        self.run_id = run_id


def run_emulation(
    options: RunOptions,
    emulation: EmulationOptions,
    *,
    store: str | None = None,
    progress: bool = False,
    listener: EmulationListener | None = None,
) -> EmulationResult:
    """Emulate `options.workload` trained by each worker count of `emulation` in its mode
    (sync, async, local-sgd), one stored run each (tagged emulate:<id>).

    `options` are the run options that shape the optimisation (lr scaling, epochs or steps,
    seed, evaluation, target, data); everything a user can get wrong is checked for every
    worker count before the first one trains. `progress` shows the trainer's progress on
    stderr. A run stopped by Ctrl-C, SIGTERM or an error is stored as failed, then the
    exception goes on.
    """
    import torch

    from trainscale.data.tensors import Located
    from trainscale.emulation.engine import emulate, plan_global_steps
    from trainscale.emulation.record import complete_emulation, create_emulation_row, emulation_tag
    from trainscale.emulation.spec import emulation_config, resolve_spec, specs_of
    from trainscale.runner.launch import RunInterrupted
    from trainscale.runner.record import new_run_id
    from trainscale.runner.worker import load_data
    from trainscale.workloads import get_workload

    listener = listener or EmulationListener()
    # Everything a user can get wrong is checked for every N before the first one trains.
    workload = get_workload(options.workload)
    specs = [resolve_spec(spec, workload.recipe.batch_size) for spec in specs_of(emulation)]
    emulation_id = uuid.uuid4().hex[:12]
    options = options.with_(workload=workload.name, tag=emulation_tag(emulation_id))
    located: dict[tuple[Any, ...], Located] = {}
    configs = [emulation_config(options, spec, located) for spec in specs]
    store_file = Path(store) if store else default_store_path()
    RunStore(store_file).close()  # a store that cannot be written fails now, not after training
    data = load_data(configs[0])  # every N trains on the same data: load it once
    plans = [
        plan_global_steps(config, spec, data.num_train)
        for config, spec in zip(configs, specs, strict=True)
    ]
    if configs[0].parallel.threads_per_worker is not None:
        torch.set_num_threads(configs[0].parallel.threads_per_worker)

    result = EmulationResult(emulation_id, workload.name, emulation.mode, [], store)
    for index, (config, spec, plan) in enumerate(zip(configs, specs, plans, strict=True), 1):
        listener.started(index, len(specs), spec, config, plan)
        run_id = new_run_id()
        # One store, held open from the run's row to its result: a file moved or removed
        # meanwhile is noticed, and the result goes to a copy rather than being lost.
        with RunStore(store_file) as opened:
            create_emulation_row(opened, run_id, config, spec)
            try:
                outcome = emulate(config, spec, workload, data, make_progress(True, not progress))
            except BaseException as error:  # Ctrl-C, SIGTERM, divergence, a bug: recorded
                reason = failure_reason(error)
                opened.fail_run(run_id, reason)
                signum = stop_signal(error)
                if signum is not None:
                    raise RunInterrupted(signum, run_id) from None
                left = [s.workers for s in specs[index:]]
                raise EmulationFailed(run_id, spec.workers, reason, left) from error
            complete_emulation(opened, run_id, outcome)
        summary = outcome.summary
        result.rows.append(
            {
                "run_id": run_id,
                **summary["emulation"],
                "test_accuracy": summary["test_accuracy"],
                "accuracy_by_epoch": [e["test_accuracy"] for e in outcome.epochs],
                "time_to_target_s": summary["time_to_target_s"],
            }
        )
    return result
