"""Start N worker processes with PyTorch's elastic launcher (the engine behind torchrun)."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable
from typing import Any

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch


class WorkersFailed(Exception):
    """One or more workers failed; `reason` is a one-line account of the first failure."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _first_failure(error: ChildFailedError) -> str:
    rank, failure = error.get_first_failure()
    message = failure.message
    while isinstance(message, dict):  # the error file's structured form nests "message"
        message = message.get("message", "")
    text = str(message or "").strip().splitlines()
    detail = text[-1] if text else ""
    if not detail or detail.startswith("To enable traceback"):
        detail = f"exit code {failure.exitcode}"
        if failure.exitcode is not None and failure.exitcode < 0:
            detail = f"killed by signal {-failure.exitcode}"
    return f"worker rank {rank} (pid {failure.pid}) failed: {detail}"


def launch_workers(
    entrypoint: Callable[..., Any],
    args: tuple[Any, ...],
    num_workers: int,
    shutdown_timeout_s: int = 5,
) -> dict[int, Any]:
    """Run `entrypoint(*args)` in `num_workers` fresh processes on this machine.

    Standalone rendezvous as `torchrun --standalone` does it: a c10d store on
    127.0.0.1:0, so the OS picks a free port and two runs at once never collide. No restarts:
    a failed worker fails the run. Returns each local rank's return value.
    """
    log_dir = tempfile.mkdtemp(prefix="trainscale-launch-")
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs

    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=num_workers,
        run_id=f"trainscale-{uuid.uuid4().hex[:12]}",
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=log_dir),
        shutdown_timeout=shutdown_timeout_s,
    )
    try:
        return elastic_launch(config, entrypoint)(*args)
    except ChildFailedError as error:
        raise WorkersFailed(_first_failure(error)) from None
