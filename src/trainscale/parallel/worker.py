"""What each worker process runs: set up, load data, train, and (rank 0) store the result."""

from __future__ import annotations

import traceback
from typing import Any

from torch.distributed.elastic.multiprocessing.errors import record

from trainscale.config import RunConfig, data_request
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.train.progress import make_progress
from trainscale.train.trainer import train
from trainscale.workloads import get_workload
from trainscale.workloads.base import TensorData


def load_data(config: RunConfig) -> TensorData:
    """The run's dataset, real (from the search path) or synthetic (from the seed)."""
    workload = get_workload(config.workload)
    request = data_request(config)
    if config.data == "synthetic":
        return workload.make_synthetic(request)
    return workload.load_real(request)


@record  # writes the exception to the launcher's error file, so the parent can report it
def worker_main(
    config_dict: dict[str, Any],
    run_id: str,
    store_path: str | None,
    quiet: bool = False,
    create_row: bool = False,
) -> dict[str, Any] | None:
    """Entry point of one worker. Rank 0 stores the result and returns the summary.

    `create_row` is set when no parent process created the run's row (the worker was started
    by an external torchrun); rank 0 then creates it, and records a failure itself.
    """
    env = DistEnv.from_environ()
    config = RunConfig.from_dict(config_dict)
    strategy = make_strategy(config, env)
    store = None
    if env.is_main and store_path is not None:
        from trainscale.results.store import RunStore

        store = RunStore(store_path)
        if create_row:
            from trainscale.runner import create_run_row

            create_run_row(store, run_id, config)
    try:
        strategy.setup()
        workload = get_workload(config.workload)
        data = load_data(config)
        outcome = train(config, workload, data, strategy, make_progress(env.is_main, quiet))
        result = {
            "summary": outcome.summary,
            "epochs": outcome.epochs,
            "workers": outcome.workers,
            "data_source": data.source,
            "data_kind": data.kind,
        }
        if store is not None:
            from trainscale.runner import store_outcome

            store_outcome(store, run_id, config, outcome, data)
        return result if env.is_main else None
    except BaseException as error:
        if store is not None and create_row:
            store.fail_run(run_id, f"rank 0: {type(error).__name__}: {error}")
        if not isinstance(error, Exception):
            raise
        traceback.print_exc()
        raise
    finally:
        strategy.teardown()
        if store is not None:
            store.close()
