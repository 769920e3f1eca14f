"""One run from start to stored result: resolve, check data, record, launch or join, store.

The parent process validates everything a user can get wrong before any worker starts (so
mistakes cost one line, not a stored failure), creates the run's row as 'running', launches
the workers, and marks the run failed with the first worker's reason if they fail, or as
interrupted when a signal (Ctrl-C, SIGTERM) stops it. Rank 0 writes the completed result in
one transaction. A failure that cannot be recorded (the disk is full) is said so in the
error; the row, left 'running', is found stale once this process has gone (see
results/owner.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainscale.config import RunConfig, RunOptions, data_request, resolve
from trainscale.errors import ConfigError, StoreError
from trainscale.interrupts import Interrupted, failure_reason, interrupted_reason, stop_signal
from trainscale.parallel.distenv import DistEnv, launched_externally
from trainscale.results.store import RunStore, default_store_path
from trainscale.workloads.base import DataSize, Located


@dataclass(frozen=True)
class SweepSlot:
    """Where a run sits in a sweep: the sweep, its plan index and its repeat index."""

    sweep_id: str
    item: int
    repeat: int


def new_run_id() -> str:
    return uuid.uuid4().hex


def create_run_row(
    store: RunStore, run_id: str, config: RunConfig, sweep: SweepSlot | None = None
) -> None:
    """Insert the run as 'running', with its resolved config and this machine's facts."""
    from trainscale.system import collect_environment

    env = collect_environment()
    threads = config.threads_per_worker
    if threads is None:  # left to torch: record what torch picks (its default on this machine)
        threads = env["torch_num_threads_default"]
    store.create_run(
        run_id,
        config.workload,
        config.to_dict(),
        env,
        data_kind=config.data,
        world_size=config.world_size,
        threads_per_worker=threads,
        affinity=config.affinity,
        precision=config.precision,
        global_batch_size=config.global_batch_size,
        tag=config.tag,
        config_hash=config.settings_hash(),
        sweep_id=sweep.sweep_id if sweep else None,
        sweep_item=sweep.item if sweep else None,
        repeat_index=sweep.repeat if sweep else None,
    )


def store_outcome(store: RunStore, run_id: str, config: RunConfig, outcome: Any, data: Any) -> None:
    """Write rank 0's measurements as the completed run (one transaction)."""
    summary = dict(outcome.summary)
    # What the workers actually ran with (cores, threads), beside what was asked for.
    summary["workers"] = outcome.workers
    summary["data_source"] = data.source
    from trainscale.hardware import hardware_figures_safe

    # Devices, peak and MFU (against the table, and against this machine's probe if stored).
    summary.update(hardware_figures_safe(config, summary, outcome.workers, store))
    store.complete_run(run_id, summary, outcome.epochs, outcome.step_times_s)


def prepare(opts: RunOptions, located: dict[tuple[Any, ...], Located] | None = None) -> RunConfig:
    """Resolve options, make sure the data is there (downloading it if allowed), and check
    that the run fits: a worker's shard holds a batch, and this machine's memory holds the
    workers. Raises TrainscaleError (one line) before any worker starts.

    `located` caches where each distinct data request was found: locating reads the files
    in full (to fail early on a corrupt one), and a sweep over one dataset pays that once.
    """
    config, size = locate_data(resolve(opts), located)
    check_capacity(config, size)
    return config


def locate_data(
    config: RunConfig, located: dict[tuple[Any, ...], Located] | None = None
) -> tuple[RunConfig, DataSize]:
    """(the config reading from where the data was found, the dataset's size).

    Real data is located (and checked) as `prepare` does; synthetic data has the size its
    workload declares.
    """
    from trainscale.workloads import get_workload

    workload = get_workload(config.workload)
    if config.data != "real":
        if workload.synthetic_size is None:  # a workload spec's omission, not a user's
            raise ValueError(f"workload {workload.name} declares no synthetic_size")
        return config, workload.synthetic_size
    key = (
        config.workload,
        config.data_dir,
        config.download,
        tuple(sorted(config.workload_options.items())),
    )
    if located is None:
        located = {}
    if key not in located:
        located[key] = workload.locate_real(data_request(config))
    found = located[key]
    # Workers read from where the parent found the files: no second search or download.
    return config.with_(data_dir=str(found.path)), found.size


def check_capacity(config: RunConfig, size: DataSize, batch_advice: str | None = None) -> None:
    """ConfigError unless a worker's shard of `size` holds one batch and this node's memory
    holds the workers (data, model state, processes). The memory check is left out under an
    external launcher: the workers already exist and already hold their share.
    `batch_advice` replaces the batch error's advice (for commands without --batch-size)."""
    from trainscale.footprint import check_run_memory, estimate_footprint
    from trainscale.train.trainer import check_batch_fits
    from trainscale.workloads import get_workload

    check_batch_fits(config.batch_size, size.num_train, config.world_size, batch_advice)
    if not launched_externally():
        footprint = estimate_footprint(
            get_workload(config.workload), config.workload_options, size, config.seed
        )
        check_run_memory(config, footprint)


def execute_run(
    opts: RunOptions,
    store_path: Path | None = None,
    quiet: bool = False,
    sweep: SweepSlot | None = None,
    config: RunConfig | None = None,
) -> dict[str, Any] | RemoteResult | None:
    """Run once and return the stored result as the `--json` dictionary.

    Raises TrainscaleError for user mistakes (nothing stored) and RunFailed when the run
    started but failed (stored as failed with its reason). `config` skips resolving `opts`
    again when the caller already prepared it (sweeps resolve every run before the first).
    One node of several returns a RemoteResult where global rank 0 ran on another node, and
    raises RendezvousFailed when the nodes never formed the job. A non-zero rank under an
    external launcher returns None.
    """
    from trainscale.parallel.launcher import WorkersFailed, launch_workers
    from trainscale.parallel.worker import worker_main
    from trainscale.results.export import run_to_json_dict

    store_file = Path(store_path) if store_path else default_store_path()
    if launched_externally():
        return _join_external(opts, store_file, quiet)
    config = config or prepare(opts)
    if config.nnodes > 1:
        if sweep is not None:  # a sweep's bookkeeping lives in one process on one node
            raise ConfigError("a sweep runs on one node; nnodes > 1 is for `trainscale run`")
        return _run_on_nodes(config, store_file, quiet)
    run_id = new_run_id()
    with RunStore(store_file) as store:
        create_run_row(store, run_id, config, sweep)
    try:
        launch_workers(
            worker_main, (config.to_dict(), run_id, str(store_file), quiet, False), config.workers
        )
    except WorkersFailed as failure:
        unrecorded = record_failure(store_file, run_id, failure.reason)
        raise RunFailed(run_id, failure.reason, unrecorded) from None
    except BaseException as error:  # Ctrl-C, a signal, or a bug while workers ran
        unrecorded = record_failure(store_file, run_id, failure_reason(error))
        signum = stop_signal(error)
        if signum is None:
            raise
        raise RunInterrupted(signum, run_id, unrecorded) from None
    with RunStore(store_file) as store:
        return run_to_json_dict(store.get_run(run_id))


def _join_external(opts: RunOptions, store_file: Path, quiet: bool) -> dict[str, Any] | None:
    """Started by an external torchrun/srun: become one worker; rank 0 records the run."""
    from trainscale.parallel.worker import worker_main
    from trainscale.results.export import run_to_json_dict

    env = DistEnv.from_environ()
    if env.world_size % env.local_world_size:
        raise ConfigError(
            f"{env.world_size} workers over nodes of {env.local_world_size}: trainscale needs "
            "the same number of workers on every node"
        )
    # The launcher decides the shape: this node's workers (for the CPU plan and the GPU
    # check) and the nodes (for the world size and the global batch).
    shape = {"workers": env.local_world_size, "nnodes": env.world_size // env.local_world_size}
    opts = RunOptions(**{**opts.__dict__, **shape})
    config = prepare(opts)
    run_id = new_run_id()
    worker_main(config.to_dict(), run_id, str(store_file), quiet, True)
    if not env.is_main:
        return None
    with RunStore(store_file) as store:
        return run_to_json_dict(store.get_run(run_id))


@dataclass(frozen=True)
class RemoteResult:
    """One node's outcome of a multi-node run whose global rank 0 ran on another node."""

    run_id: str
    nnodes: int
    world_size: int

    def describe(self) -> str:
        return (
            f"run {self.run_id[:8]} completed on {self.nnodes} nodes ({self.world_size} "
            "workers); global rank 0 stored the result in the store on its node"
        )


def _run_on_nodes(
    config: RunConfig, store_file: Path, quiet: bool
) -> dict[str, Any] | RemoteResult:
    """This node's part of a multi-node run: join the others, run this node's workers.

    No parent creates the row: which node gets global rank 0 is only known once the nodes
    have met, so rank 0's worker creates it and records its own failure. The workers report
    the run id here, so every node prints the same id, and a failure that rank 0 could not
    record (it was stopped, or its node died and the store is shared) is recorded here.
    """
    import tempfile

    from trainscale.parallel.launcher import RendezvousLost, WorkersFailed, launch_workers
    from trainscale.parallel.rendezvous import Rendezvous, RendezvousFailed
    from trainscale.parallel.worker import worker_main
    from trainscale.results.export import run_to_json_dict

    # Any node may get rank 0, so each checks its store before the others wait for it.
    with RunStore(store_file):
        pass
    rendezvous = Rendezvous(
        endpoint=str(config.rdzv_endpoint),
        job_id=str(config.rdzv_id),
        nnodes=config.nnodes,
        timeout_s=float(config.rdzv_timeout_s or 0),
    )
    with tempfile.TemporaryDirectory(prefix="trainscale-node-") as report_dir:
        args = (config.to_dict(), new_run_id(), str(store_file), quiet, True, report_dir)
        try:
            returned = launch_workers(worker_main, args, config.workers, rendezvous=rendezvous)
        except RendezvousFailed:
            raise
        except RendezvousLost as lost:
            started, run_id = _read_reports(report_dir)
            if not started:  # no worker ran anywhere: nothing stored, safe to retry
                raise RendezvousFailed(lost.reason) from None
            # Mid-run, the agent only loses the store when the node hosting it goes away.
            reason = f"a node left the job ({lost.reason})"
            raise _record_failure(store_file, run_id, reason) from None
        except WorkersFailed as failure:
            run_id = _read_reports(report_dir)[1]
            raise _record_failure(store_file, run_id, failure.reason) from None
        except BaseException as error:  # Ctrl-C, a signal, or a bug while workers ran
            run_id = _read_reports(report_dir)[1]
            failed = _record_failure(store_file, run_id, failure_reason(error))
            signum = stop_signal(error)
            if signum is None:
                raise
            raise RunInterrupted(signum, run_id, failed.unrecorded) from None
        run_id = _read_reports(report_dir)[1] or ""
    if 0 in returned:  # keyed by global rank: rank 0 ran here and stored the run here
        with RunStore(store_file) as store:
            return run_to_json_dict(store.get_run(run_id))
    return RemoteResult(run_id, config.nnodes, config.world_size)


def _read_reports(report_dir: str) -> tuple[bool, str | None]:
    """(whether any local worker started, the run id they reported if any)."""
    texts = [p.read_text() for p in Path(report_dir).glob("rank-*") if p.suffix != ".partial"]
    return bool(texts), next((text for text in texts if text), None)


def _record_failure(store_file: Path, run_id: str | None, reason: str) -> RunFailed:
    """Mark the run failed here if its row is in this node's store and still 'running'.

    The row is here when global rank 0 ran on this node (and was stopped before it could
    record the failure itself) or when the nodes share one store. Elsewhere nothing is
    written: a row is never created on a node that did not hold rank 0.
    """
    unrecorded = None
    if run_id:
        try:
            with RunStore(store_file) as store:
                try:
                    running = store.get_run(run_id).status == "running"
                except StoreError:
                    running = False
            if running:
                unrecorded = record_failure(store_file, run_id, reason)
        except StoreError as error:
            unrecorded = str(error)
    return RunFailed(run_id, reason, unrecorded)


def record_failure(store_file: Path, run_id: str, reason: str) -> str | None:
    """Mark the run failed with `reason`; None when done, else why the store refused.

    A store that cannot be written (a full disk, a lost file system) must not turn a run's
    failure into a different error: the caller reports both in its one line.
    """
    try:
        with RunStore(store_file) as store:
            store.fail_run(run_id, reason)
    except StoreError as error:
        return str(error)
    return None


def _unrecorded_note(unrecorded: str | None) -> str:
    return f"; the run could not be recorded as failed: {unrecorded}" if unrecorded else ""


class RunFailed(Exception):
    """A run started and failed; it is stored as failed with `reason` (by global rank 0, or
    by the launching parent), unless the store refused: then `unrecorded` says why."""

    def __init__(self, run_id: str | None, reason: str, unrecorded: str | None = None):
        name = f"run {run_id[:8]}" if run_id else "run"
        super().__init__(f"{name} failed: {reason}{_unrecorded_note(unrecorded)}")
        self.run_id = run_id
        self.reason = reason
        self.unrecorded = unrecorded


class RunInterrupted(Interrupted):
    """A signal stopped a run while its workers ran; the workers are stopped and the run is
    stored as failed with the reason 'interrupted (SIGNAL)', unless the store refused."""

    def __init__(self, signum: int, run_id: str | None, unrecorded: str | None = None):
        super().__init__(signum)
        self.run_id = run_id
        self.unrecorded = unrecorded

    def describe(self) -> str:
        """One line for the terminal."""
        name = f"run {self.run_id[:8]}" if self.run_id else "run"
        return f"{name} {interrupted_reason(self.signum)}{_unrecorded_note(self.unrecorded)}"
