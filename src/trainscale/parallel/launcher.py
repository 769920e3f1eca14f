"""Start N worker processes with PyTorch's elastic launcher (the engine behind torchrun)."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable
from typing import Any

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous import RendezvousError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from trainscale.parallel import rendezvous as rdzv


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
    # An error raised inside a C++ callback (a DDP comm hook) ends with an "At:" list of
    # Python frames; the message is what comes before it.
    text = str(message or "").split("\nAt:\n")[0].strip().splitlines()
    detail = text[-1] if text else ""
    if not detail or detail.startswith("To enable traceback"):
        detail = f"exit code {failure.exitcode}"
        if failure.exitcode is not None and failure.exitcode < 0:
            detail = f"killed by signal {-failure.exitcode}"
    return f"worker rank {rank} (pid {failure.pid}) failed: {detail}"


class RendezvousLost(Exception):
    """The rendezvous failed: before any worker started (the nodes never formed the job), or
    after (the node hosting the rendezvous store went away). `reason` is one line."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def launch_workers(
    entrypoint: Callable[..., Any],
    args: tuple[Any, ...],
    num_workers: int,
    shutdown_timeout_s: int = 5,
    rendezvous: rdzv.Rendezvous | None = None,
) -> dict[int, Any]:
    """Run `entrypoint(*args)` in `num_workers` fresh processes on this machine.

    Without `rendezvous`: standalone, as `torchrun --standalone` does it, a c10d store on
    127.0.0.1:0, so the OS picks a free port and two runs at once never collide. With it:
    this node joins `rendezvous.nnodes` nodes at its endpoint (c10d, as `torchrun --nnodes
    N --rdzv-backend c10d` does), waiting at most `rendezvous.timeout_s` for the endpoint
    and the other nodes together. No restarts: a failed worker fails the run. Returns each
    local worker's return value, keyed by its global rank.

    Raises WorkersFailed when a worker fails, RendezvousLost when the rendezvous does, and
    rendezvous.RendezvousFailed when the endpoint is not reachable in time.
    """
    log_dir = tempfile.mkdtemp(prefix="trainscale-launch-")
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs

    nodes: dict[str, Any] = {
        "min_nodes": 1,
        "max_nodes": 1,
        "run_id": f"trainscale-{uuid.uuid4().hex[:12]}",
        "rdzv_endpoint": "127.0.0.1:0",
    }
    if rendezvous is not None:
        nodes = rdzv.launch_settings(rendezvous)
    config = LaunchConfig(
        nproc_per_node=num_workers,
        rdzv_backend="c10d",
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=log_dir),
        shutdown_timeout=shutdown_timeout_s,
        **nodes,
    )
    try:
        return elastic_launch(config, entrypoint)(*args)
    except ChildFailedError as error:
        raise WorkersFailed(_first_failure(error)) from None
    except RendezvousError as error:
        if rendezvous is None:
            raise
        raise RendezvousLost(rdzv.describe_failure(rendezvous, error)) from None
    finally:
        # The workers' logs and error files have been read by now (the reason of a failure
        # is in the exception); keeping them would leave a directory per run in /tmp.
        shutil.rmtree(log_dir, ignore_errors=True)
