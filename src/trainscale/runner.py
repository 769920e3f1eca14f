"""One run from start to stored result: resolve, check data, record, launch or join, store.

The parent process validates everything a user can get wrong before any worker starts (so
mistakes cost one line, not a stored failure), creates the run's row as 'running', launches
the workers, and marks the run failed with the first worker's reason if they fail. Rank 0
writes the completed result in one transaction.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from trainscale.config import RunConfig, RunOptions, data_request, resolve
from trainscale.parallel.distenv import DistEnv, launched_externally
from trainscale.results.store import RunStore, default_store_path


def new_run_id() -> str:
    return uuid.uuid4().hex


def create_run_row(store: RunStore, run_id: str, config: RunConfig) -> None:
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
        world_size=config.workers,
        threads_per_worker=threads,
        affinity=config.affinity,
        precision=config.precision,
        global_batch_size=config.global_batch_size,
        tag=config.tag,
    )


def store_outcome(store: RunStore, run_id: str, config: RunConfig, outcome: Any, data: Any) -> None:
    """Write rank 0's measurements as the completed run (one transaction)."""
    summary = dict(outcome.summary)
    # What the workers actually ran with (cores, threads), beside what was asked for.
    summary["workers"] = outcome.workers
    summary["data_source"] = data.source
    store.complete_run(run_id, summary, outcome.epochs, outcome.step_times_s)


def prepare(opts: RunOptions) -> RunConfig:
    """Resolve options and make sure the data is there (downloading it if allowed)."""
    config = resolve(opts)
    if config.data == "real":
        from trainscale.workloads import get_workload

        source = get_workload(config.workload).locate_real(data_request(config))
        # Workers read from where the parent found the files: no second search or download.
        config = config.with_(data_dir=str(source))
    return config


def execute_run(
    opts: RunOptions, store_path: Path | None = None, quiet: bool = False
) -> dict[str, Any]:
    """Run once and return the stored result as the `--json` dictionary.

    Raises TrainscaleError for user mistakes (nothing stored) and RunFailed when the run
    started but failed (stored as failed with its reason).
    """
    from trainscale.parallel.launcher import WorkersFailed, launch_workers
    from trainscale.parallel.worker import worker_main
    from trainscale.results.export import run_to_json_dict

    store_file = Path(store_path) if store_path else default_store_path()
    if launched_externally():
        return _join_external(opts, store_file, quiet)
    config = prepare(opts)
    run_id = new_run_id()
    with RunStore(store_file) as store:
        create_run_row(store, run_id, config)
    try:
        launch_workers(
            worker_main, (config.to_dict(), run_id, str(store_file), quiet, False), config.workers
        )
    except WorkersFailed as failure:
        with RunStore(store_file) as store:
            store.fail_run(run_id, failure.reason)
        raise RunFailed(run_id, failure.reason) from None
    except BaseException as error:  # Ctrl-C or a signal while workers ran
        reason = "interrupted" if isinstance(error, KeyboardInterrupt) else repr(error)
        with RunStore(store_file) as store:
            store.fail_run(run_id, reason)
        raise
    with RunStore(store_file) as store:
        return run_to_json_dict(store.get_run(run_id))


def _join_external(opts: RunOptions, store_file: Path, quiet: bool) -> dict[str, Any] | None:
    """Started by an external torchrun/srun: become one worker; rank 0 records the run."""
    from trainscale.parallel.worker import worker_main
    from trainscale.results.export import run_to_json_dict

    env = DistEnv.from_environ()
    opts = RunOptions(**{**opts.__dict__, "workers": env.world_size})
    config = prepare(opts)
    run_id = new_run_id()
    worker_main(config.to_dict(), run_id, str(store_file), quiet, True)
    if not env.is_main:
        return None
    with RunStore(store_file) as store:
        return run_to_json_dict(store.get_run(run_id))


class RunFailed(Exception):
    """A run started and failed; it is stored as failed with `reason`."""

    def __init__(self, run_id: str, reason: str):
        super().__init__(f"run {run_id[:8]} failed: {reason}")
        self.run_id = run_id
        self.reason = reason
