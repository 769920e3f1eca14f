"""What each worker process runs: set up, load data, train, and (rank 0) store the result."""

from __future__ import annotations

import contextlib
import os
import signal
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch.distributed.elastic.multiprocessing.errors import record

from trainscale.config.options import RunConfig
from trainscale.data.tensors import TensorData
from trainscale.errors import StoreError, TrainscaleError, WorkloadError
from trainscale.frameworks import trainer as framework_trainer
from trainscale.hardware.energy import combine_nodes, start_node_meter
from trainscale.parallel.distenv import DistEnv, exit_with_parent
from trainscale.parallel.interrupts import (
    WorkerStopped,
    exit_quietly_on_signals,
    failure_reason,
    interrupted_reason,
    received_signal,
)
from trainscale.parallel.loopback import pin_gloo_to_loopback
from trainscale.parallel.strategy import make_strategy
from trainscale.results.run_result import RunResult
from trainscale.results.store import RunStore
from trainscale.runner.exit_deadline import bounded_exit
from trainscale.runner.failure_log import lost_a_peer, save_traceback
from trainscale.runner.node_agreement import check_nodes_agree, shared_settings
from trainscale.runner.record import create_run_row, store_outcome
from trainscale.runner.resolve import data_request
from trainscale.train.divergence import TrainingDiverged
from trainscale.train.progress import make_progress
from trainscale.workloads import get_workload
from trainscale.workloads.custom import is_user_exit, parse_reference, user_code_error

if TYPE_CHECKING:
    from trainscale.results.store import RunStore


def load_data(config: RunConfig) -> TensorData:
    """The run's dataset, real (from the search path) or synthetic (from the seed)."""
    workload = get_workload(config.workload)
    request = data_request(config)
    if config.data.kind == "synthetic":
        return workload.make_synthetic(request)
    return workload.load_real(request)


@record  # writes the exception to the launcher's error file, so the parent can report it
@bounded_exit(lambda: f"trainscale: worker rank {os.environ.get('RANK', '0')}")
def worker_main(
    config_dict: dict[str, Any],
    run_id: str,
    store_path: str | None,
    quiet: bool = False,
    create_row: bool = False,
    report_dir: str | None = None,
    progress_file: str | None = None,
) -> RunResult | None:
    """Entry point of one worker. Rank 0 stores the result and returns it.

    `create_row` is set when no parent process created the run's row (the worker was started
    by an external torchrun, or is one of several nodes); rank 0 then creates it, and records
    a failure itself. Every rank then adopts rank 0's run id, so all nodes name the run alike.
    `report_dir`, when given, is where this worker tells its launching parent that it started
    and which run id the job uses (the parent has no other channel when the run fails).
    `progress_file`, when given, is where the main rank writes its step count (a sweep
    shows it under its own progress bar).
    """
    exit_with_parent()
    exit_quietly_on_signals()
    env = DistEnv.from_environ()
    if env.world_size == env.local_world_size:
        pin_gloo_to_loopback()  # every peer is on this machine: nothing to open to the network
    config = RunConfig.from_flat(config_dict)
    strategy = make_strategy(config, env)
    # Rank 0's id is the run's; the others learn it once the process group is up.
    _report(report_dir, env, run_id if env.is_main else "")
    store = None
    if env.is_main and store_path is not None:
        # Where the launching process created the row, the store must be the file it made:
        # opened without `create`, a store deleted since is an error, never a new empty
        # store with no row for this run's result.
        if not create_row and not Path(store_path).exists():
            raise StoreError(
                f"results store {store_path} was deleted after the run was created in it; "
                "the run did not start"
            )
        store = RunStore(store_path, create=create_row)
        if create_row:
            create_run_row(store, run_id, config)
    try:
        strategy.setup()
        if env.distributed:  # each node resolved its own command: they must agree
            check_nodes_agree(strategy.gather_objects(shared_settings(config)))
        if create_row and env.distributed:
            run_id = strategy.gather_objects(run_id)[0]
            _report(report_dir, env, run_id)
        # A custom workload is loaded from its file or module (once per process); from
        # then on it also answers to its name.
        workload = get_workload(config.workload_source or config.workload)
        # Imported once the process is pinned: a framework's runtime starts its threads then.
        train = framework_trainer(config.parallel.framework)
        data = load_data(config)
        meter = start_node_meter(config.parallel.device, env.local_rank, env.local_world_size)
        outcome = train(
            config, workload, data, strategy, make_progress(env.is_main, quiet, progress_file)
        )
        # Local rank 0 of each node read its node's counters; every rank joins the gather.
        reading = None if meter is None else meter.stop()
        energy_j = combine_nodes(strategy.gather_objects(reading))
        if store is None:
            return None
        return store_outcome(store, run_id, config, outcome, data.source, energy_j, workload)
    except BaseException as error:
        stopped = received_signal()
        explained = _explain(error, config)
        if store is not None and create_row:
            _record_own_failure(store, run_id, explained, stopped)
        elif store is not None and isinstance(explained, TrainingDiverged):
            # Stored as it reads, not under the launcher's 'worker rank 0 (pid N) failed:'
            # (the parent's record of the failure then finds the run failed already).
            with contextlib.suppress(StoreError):
                store.fail_run(run_id, str(explained))
        if stopped is not None:  # leave with 128 + N, whatever the signal interrupted
            raise WorkerStopped(stopped) from None
        if not isinstance(explained, Exception):
            raise
        save_traceback(error, run_id, env.rank)
        # An error of trainscale's own (a bug) keeps its traceback on the terminal; one the
        # user can act on (their code's, a diverged run) is the parent's one line, with a
        # pointer to the saved traceback.
        if not isinstance(explained, TrainscaleError) and not lost_a_peer(error):
            traceback.print_exc()
        if explained is not error:  # the launcher's error file then holds the explanation
            raise explained from error
        raise
    finally:
        strategy.teardown()
        if store is not None:
            store.close()


def _explain(error: BaseException, config: RunConfig) -> BaseException:
    """An error of a custom workload's code as one line naming its file and line (what the
    run is stored as failed with); any other error as it is.

    A `sys.exit()` from the workload's code (its forward pass, its loss) is such an error
    too: left alone it would end the worker with status 0 before rank 0 stored anything.
    """
    if is_user_exit(error) and config.workload_source is None:
        code = "" if error.code is None else repr(error.code)
        return RuntimeError(f"sys.exit({code}) was called during the run")
    if config.workload_source is None:
        return error
    if not isinstance(error, Exception) and not is_user_exit(error):
        return error
    if isinstance(error, TrainscaleError):  # already one line (a diverged run, a DataError)
        return error
    try:
        reference = parse_reference(config.workload_source)
    except WorkloadError:  # the file went away meanwhile: the error as it is
        return error
    return user_code_error(error, reference, f"workload {reference.shown}:")


def _record_own_failure(
    store: RunStore, run_id: str, error: BaseException, stopped: signal.Signals | None
) -> None:
    """Rank 0 of a run without a launching parent records why it ended, if it can."""
    if stopped is not None:  # whatever the signal interrupted ended with the error seen here
        reason = interrupted_reason(stopped)
    elif isinstance(error, Exception):
        reason = f"rank 0: {type(error).__name__}: {error}"
    else:
        reason = f"rank 0: {failure_reason(error)}"
    # A store that cannot be written (a full disk) is left to the node's parent, which tries
    # again; a row left 'running' is found stale once this process is gone.
    with contextlib.suppress(StoreError):
        store.fail_run(run_id, reason)


def _report(report_dir: str | None, env: DistEnv, run_id: str) -> None:
    """Write `run_id` ('' = started, id not known yet) where the launching parent reads it."""
    if report_dir is None:
        return
    path = Path(report_dir) / f"rank-{env.rank}"
    partial = path.with_name(path.name + ".partial")
    partial.write_text(run_id)
    os.replace(partial, path)  # the parent never reads half a file
