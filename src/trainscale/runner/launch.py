"""One run from the parent's side: the row, the launch (or joining an external launcher,
or meeting other nodes), and the failure or interruption recorded with its reason.

The parent validates everything a user can get wrong before any worker starts (so mistakes
cost one line, not a stored failure: see resolve.py), creates the run's row as 'running',
launches the workers, and marks the run failed with the first worker's reason if they fail,
or as interrupted when a signal (Ctrl-C, SIGTERM) stops it. Rank 0 writes the completed
result in one transaction; the parent samples the machine while the workers run and adds
what else used it, with a verdict, to the completed run (hardware/contention.py). A failure
that cannot be recorded (the disk is full) is said so in the error; the row, left
'running', is found stale once this process has gone (see results/owner.py).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainscale.config.options import RunConfig, RunOptions
from trainscale.errors import ConfigError, StoreError
from trainscale.hardware.contention import Contention, ContentionSampler
from trainscale.parallel import launcher
from trainscale.parallel.distenv import DistEnv, launched_externally
from trainscale.parallel.interrupts import (
    Interrupted,
    failure_reason,
    interrupted_reason,
    stop_signal,
)
from trainscale.parallel.launcher import RendezvousLost, WorkersFailed
from trainscale.parallel.rendezvous import (
    Rendezvous,
    RendezvousFailed,
    gloo_for_workers,
    master_endpoint,
)
from trainscale.results.export import run_to_json_dict
from trainscale.results.store import RunStore, default_store_path
from trainscale.runner.failure_log import saved_traceback
from trainscale.runner.record import SweepSlot, create_run_row, new_run_id
from trainscale.runner.resolve import batch_split, precision_line, prepare
from trainscale.runner.worker import worker_main

log = logging.getLogger(__name__)


def start_run(
    opts: RunOptions,
    store_path: Path | str | None = None,
    *,
    quiet: bool = False,
    announce: Callable[[str], None] | None = None,
) -> dict[str, Any] | RemoteResult | None:
    """One run as `trainscale run` and the Python API make it: resolve and check `opts`
    (a mistake costs one line, nothing started), hand how the global batch is split to
    `announce` before any worker starts, then `execute_run` (which does not resolve again).

    Under an external launcher every rank would announce it, so there the options are
    resolved by `execute_run` and nothing is announced. Returns and raises as `execute_run`.
    """
    config = None
    if not launched_externally():
        config = prepare(opts)
        if announce is not None:
            announce(batch_split(config))
            announce(precision_line(config))
    return execute_run(opts, Path(store_path) if store_path else None, quiet, config=config)


def execute_run(
    opts: RunOptions,
    store_path: Path | None = None,
    quiet: bool = False,
    sweep: SweepSlot | None = None,
    config: RunConfig | None = None,
    repeat_index: int | None = None,
) -> dict[str, Any] | RemoteResult | None:
    """Run once and return the stored result as the `--json` dictionary.

    Raises TrainscaleError for user mistakes (nothing stored) and RunFailed when the run
    started but failed (stored as failed with its reason). `config` skips resolving `opts`
    again when the caller already prepared it (sweeps resolve every run before the first).
    `repeat_index` records which round of an interleaved comparison the run belongs to (the
    bench's rounds; a sweep's comes with its `sweep` slot).
    One node of several returns a RemoteResult where global rank 0 ran on another node, and
    raises RendezvousFailed when the nodes never formed the job. A non-zero rank under an
    external launcher returns None.
    """
    store_file = Path(store_path) if store_path else default_store_path()
    if launched_externally():
        return _join_external(opts, store_file, quiet)
    config = config or prepare(opts)
    if config.nodes.nnodes > 1:
        if sweep is not None:  # a sweep's bookkeeping lives in one process on one node
            raise ConfigError("a sweep runs on one node; nnodes > 1 is for `trainscale run`")
        return _run_on_nodes(config, store_file, quiet)
    run_id = new_run_id()
    progress_file = sweep.progress_file if sweep is not None else None
    with RunStore(store_file) as store:
        create_run_row(store, run_id, config, sweep, repeat_index)
    sampler = ContentionSampler(run_cores(config)).start()
    args = (config.flat(), run_id, str(store_file), quiet, False, None, progress_file)
    return launch_and_record(
        worker_main, args, worker_processes(config), store_file, run_id, sampler
    )


def launch_and_record(
    entrypoint: Callable[..., Any],
    args: tuple[Any, ...],
    workers: int,
    store_file: Path,
    run_id: str,
    sampler: ContentionSampler,
) -> dict[str, Any]:
    """Launch the workers of the run whose row is `run_id`, record how it ended, and return
    the stored run as the `--json` dictionary: a built-in run's and a script run's alike.

    RunFailed (stored failed with its reason) when a worker fails; RunInterrupted when a
    stop signal ended it; `sampler` (started by the caller) is stopped either way.
    """
    stopped_after_result: int | None = None
    try:
        launcher.launch_workers(entrypoint, args, workers)
    except WorkersFailed as failure:
        unrecorded = record_failure(store_file, run_id, failure.reason)
        reason = failure.reason if unrecorded else stored_reason(store_file, run_id)
        saved = saved_traceback(run_id, failure.rank)
        raise RunFailed(run_id, reason or failure.reason, unrecorded, saved) from None
    except BaseException as error:  # Ctrl-C, a signal, or a bug while workers ran
        signum = stop_signal(error)
        # A stop after rank 0 stored the result (the launcher was reaping the workers)
        # leaves a whole run: it is recorded as such, and the stop still stops the caller.
        if signum is not None and stored_status(store_file, run_id) == "completed":
            stopped_after_result = signum
        else:
            unrecorded = record_failure(store_file, run_id, failure_reason(error))
            if signum is None:
                raise
            raise RunInterrupted(signum, run_id, unrecorded) from None
    finally:
        # After the launcher has reaped the workers, so their whole CPU time is counted.
        contention = sampler.stop()
    check_stored(store_file, run_id)
    record_contention(store_file, run_id, contention)
    if stopped_after_result is not None:
        raise RunInterrupted(stopped_after_result, run_id, completed=True)
    with RunStore(store_file) as store:
        return run_to_json_dict(store.get_run(run_id))


def stored_status(store_file: Path, run_id: str) -> str | None:
    """The run's stored status; None where the store cannot say."""
    try:
        with RunStore(store_file) as store:
            return store.get_run(run_id).status
    except StoreError:
        return None


def stored_reason(store_file: Path, run_id: str) -> str | None:
    """The reason the run is stored as failed with: rank 0's own when it recorded one
    first (a diverged run), so that the terminal says what the store says."""
    try:
        with RunStore(store_file) as store:
            return store.get_run(run_id).error
    except StoreError:
        return None


def check_stored(store_file: Path, run_id: str) -> None:
    """RunFailed, recorded, when the workers all exited with status 0 but rank 0 stored no
    result (something in them called `os._exit(0)`): the row must not stay 'running', nor
    be printed as a result."""
    with RunStore(store_file) as store:
        if store.get_run(run_id).status != "running":
            return
    reason = "the workers exited (status 0) before rank 0 stored the run's result"
    raise RunFailed(run_id, reason, record_failure(store_file, run_id, reason))


def local_result(result: dict[str, Any] | RemoteResult | None) -> dict[str, Any]:
    """What `execute_run` returned, for the commands that make many runs and read each one's
    result (bench, sweep, recommend): the stored result as the `--json` dictionary. A run
    whose result another process stored (another node's global rank 0, or rank 0 under an
    external launcher) is a ConfigError: these commands make their runs on one machine."""
    if not isinstance(result, dict):
        raise ConfigError(
            "this command reads the result of each of its runs, and this run's was stored "
            "by another process (global rank 0 on another node, or under an external "
            "launcher): run the command on one machine, without --nnodes or torchrun"
        )
    return result


def worker_processes(config: RunConfig) -> int:
    """Processes the launcher starts on each node: one per worker, or one holding every
    replica (`--single-process`)."""
    return 1 if config.parallel.single_process else config.parallel.workers


def run_cores(config: RunConfig) -> list[int] | None:
    """The cores a run's workers use on this node: the union of their pinned sets; None
    (every usable core) when they are not pinned."""
    sets = config.parallel.core_sets
    return sorted({core for cores in sets for core in cores}) if sets else None


def record_contention(store_file: Path, run_id: str, contention: Contention) -> None:
    """Store what the sampler saw in the completed run's summary. A store that refuses
    leaves the run as rank 0 stored it (contention 'unknown'): the run itself is whole."""
    try:
        with RunStore(store_file) as store:
            store.add_to_summary(run_id, contention.summary())
    except StoreError as error:
        log.warning("run %s: contention figures not stored: %s", run_id[:8], error)


def _join_external(opts: RunOptions, store_file: Path, quiet: bool) -> dict[str, Any] | None:
    """Started by an external torchrun/srun: become one worker; rank 0 records the run."""
    env = DistEnv.from_environ()
    # torchrun names the nodes (GROUP_WORLD_SIZE): N of them x this node's workers must make
    # the world, or a node of another --nproc-per-node passes a divisibility check alone.
    nodes = int(os.environ.get("GROUP_WORLD_SIZE", "0"))
    uneven = nodes and nodes * env.local_world_size != env.world_size
    if uneven or env.world_size % env.local_world_size:
        raise ConfigError(
            f"{env.world_size} workers over nodes of {env.local_world_size}: trainscale needs "
            "the same number of workers on every node"
        )
    # The launcher decides the shape: this node's workers (for the CPU plan and the GPU
    # check) and the nodes (for the world size and the global batch).
    shape = {"workers": env.local_world_size, "nnodes": env.world_size // env.local_world_size}
    opts = opts.with_(**shape)
    config = prepare(opts)
    run_id = new_run_id()
    # Before the process group forms: would gloo advertise loopback to the other nodes?
    # (One line per node: from its first worker.)
    several = shape["nnodes"] > 1 and config.parallel.device == "cpu"
    with gloo_for_workers(master_endpoint(os.environ), several, say=env.local_rank == 0):
        worker_main(config.flat(), run_id, str(store_file), quiet, True)
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
    # Any node may get rank 0, so each checks its store before the others wait for it.
    with RunStore(store_file):
        pass
    rendezvous = Rendezvous(
        endpoint=str(config.nodes.rdzv_endpoint),
        job_id=str(config.nodes.rdzv_id),
        nnodes=config.nodes.nnodes,
        timeout_s=float(config.nodes.rdzv_timeout_s or 0),
    )
    with tempfile.TemporaryDirectory(prefix="trainscale-node-") as report_dir:
        args = (config.flat(), new_run_id(), str(store_file), quiet, True, report_dir)
        # This node's view: other processes here slow its workers, and so the whole job.
        sampler = ContentionSampler(run_cores(config)).start()
        try:
            # Before anyone waits: would gloo advertise loopback to the other nodes?
            cpu = config.parallel.device == "cpu"
            with gloo_for_workers(rendezvous.endpoint, uses_gloo=cpu):
                returned = launcher.launch_workers(
                    worker_main, args, config.parallel.workers, rendezvous=rendezvous
                )
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
        finally:
            contention = sampler.stop()
        run_id = _read_reports(report_dir)[1] or ""
    if 0 in returned:  # keyed by global rank: rank 0 ran here and stored the run here
        record_contention(store_file, run_id, contention)
        with RunStore(store_file) as store:
            return run_to_json_dict(store.get_run(run_id))
    return RemoteResult(run_id, config.nodes.nnodes, config.world_size)


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
    failure into a different error: the caller reports both in its one line. A store file
    deleted while the run ran is not created again here: a new store at the path would hold
    only this row, beside the copy the result was saved in (RunStore.complete_run). Nor is
    the row made again in a store that replaced it: a failed row there would shadow the
    completed one of that copy when it is imported.
    """
    if not Path(store_file).exists():
        return f"the results store {store_file} is gone"
    try:
        with RunStore(store_file) as store:
            store.fail_run(run_id, reason, create=False)
    except StoreError as error:
        return str(error)
    return None


def _unrecorded_note(unrecorded: str | None) -> str:
    return f"; the run could not be recorded as failed: {unrecorded}" if unrecorded else ""


class RunFailed(Exception):
    """A run started and failed; it is stored as failed with `reason` (by global rank 0, or
    by the launching parent), unless the store refused: then `unrecorded` says why.
    `traceback_file` is where the failed worker saved its full traceback, if it did."""

    def __init__(
        self,
        run_id: str | None,
        reason: str,
        unrecorded: str | None = None,
        traceback_file: Path | None = None,
    ):
        name = f"run {run_id[:8]}" if run_id else "run"
        # The one line a terminal shows: the reason, and where the rest is (not the rest).
        where = f" (full traceback: {traceback_file})" if traceback_file else ""
        super().__init__(f"{name} failed: {reason}{_unrecorded_note(unrecorded)}{where}")
        self.run_id = run_id
        self.reason = reason
        self.unrecorded = unrecorded
        self.traceback_file = traceback_file


class RunInterrupted(Interrupted):
    """A signal stopped a run while its workers ran; the workers are stopped and the run is
    stored as failed with the reason 'interrupted (SIGNAL)', unless the store refused. With
    `completed`, the signal came after the run's result was stored: the run is whole (and
    stored completed), only what was to follow it is stopped."""

    def __init__(
        self,
        signum: int,
        run_id: str | None,
        unrecorded: str | None = None,
        *,
        completed: bool = False,
    ):
        super().__init__(signum)
        self.run_id = run_id
        self.unrecorded = unrecorded
        self.completed = completed

    def describe(self) -> str:
        """One line for the terminal."""
        name = f"run {self.run_id[:8]}" if self.run_id else "run"
        if self.completed:
            return f"{name} completed and was stored; then {interrupted_reason(self.signum)}"
        return f"{name} {interrupted_reason(self.signum)}{_unrecorded_note(self.unrecorded)}"
