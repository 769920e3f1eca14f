"""Start N worker processes with PyTorch's elastic launcher (the engine behind torchrun)."""

from __future__ import annotations

import logging
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous import RendezvousError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch
from torch.multiprocessing import ProcessExitedException, ProcessRaisedException

from trainscale.hardware.start_affinity import workers_unbound
from trainscale.parallel import loopback
from trainscale.parallel import rendezvous as rdzv
from trainscale.parallel.allocator import allocator_settings
from trainscale.parallel.exit_watch import ExitWatch, watching_exits
from trainscale.parallel.failure_reasons import first_failure, root_failure
from trainscale.parallel.interrupts import Interrupted, children_start_deaf, preserved_handlers

AGENT_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
"""The signals PyTorch's elastic agent takes over while it runs (its default list)."""


class WorkersFailed(Exception):
    """One or more workers failed; `reason` is a one-line account of the first failure,
    `rank` the global rank of the worker that failed first (when known)."""

    def __init__(self, reason: str, rank: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.rank = rank


class RendezvousLost(Exception):
    """The rendezvous failed: before any worker started (the nodes never formed the job), or
    after (the node hosting the rendezvous store went away). `reason` is one line."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def shutdown_settings(config_class: type, seconds: int) -> dict[str, Any]:
    """`shutdown_timeout` (how long the agent waits between SIGTERM and SIGKILL of its
    workers) for the launcher's config, where this torch's LaunchConfig has the field.

    Recent torch versions have the field; older ones in the declared range (from 2.4)
    reject the keyword and keep their own fixed grace period instead.
    """
    if "shutdown_timeout" in {field.name for field in fields(config_class)}:
        return {"shutdown_timeout": seconds}
    return {}


def launch_workers(
    entrypoint: Callable[..., Any],
    args: tuple[Any, ...],
    num_workers: int,
    shutdown_timeout_s: int = 5,
    rendezvous: rdzv.Rendezvous | None = None,
) -> dict[int, Any]:
    """Run `entrypoint(*args)` in `num_workers` fresh processes on this machine.

    Without `rendezvous`: one node, every socket on the loopback interface (see
    `loopback`), ports picked by the OS so that two runs at once never collide. With it:
    this node joins `rendezvous.nnodes` nodes at its endpoint (c10d, as `torchrun --nnodes
    N --rdzv-backend c10d` does), waiting at most `rendezvous.timeout_s` for the endpoint
    and the other nodes together. No restarts: a failed worker fails the run. Returns each
    local worker's return value, keyed by its global rank.

    Raises WorkersFailed when a worker fails, RendezvousLost when the rendezvous does,
    rendezvous.RendezvousFailed when the endpoint is not reachable in time, and
    Interrupted (a KeyboardInterrupt) when a signal stopped the agent, after it stopped
    the workers.
    """
    log_dir = tempfile.mkdtemp(prefix="trainscale-launch-")

    if rendezvous is None:
        loopback.register()
        nodes: dict[str, Any] = {
            "min_nodes": 1,
            "max_nodes": 1,
            "run_id": f"trainscale-{uuid.uuid4().hex[:12]}",
            "rdzv_backend": loopback.BACKEND,
            "rdzv_endpoint": "",
            "local_addr": loopback.LOOPBACK,
        }
    else:
        nodes = {"rdzv_backend": "c10d", **rdzv.launch_settings(rendezvous)}
    config = LaunchConfig(
        nproc_per_node=num_workers,
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=log_dir),
        **shutdown_settings(LaunchConfig, shutdown_timeout_s),
        **nodes,
    )
    watch = ExitWatch()
    try:
        with (
            preserved_handlers(AGENT_SIGNALS),
            children_start_deaf(),
            _quiet_agent_shutdown(),
            _no_second_traceback(),
            allocator_settings(),
            workers_unbound(),
            # Innermost: its thread has ended before the agent's signal handlers go.
            watching_exits() as watch,
        ):
            return elastic_launch(config, entrypoint)(*args)
    except SignalException as stop:  # the agent has stopped the workers by now
        if watch.reason is not None:  # the watch stopped it: a worker left unfinished
            raise WorkersFailed(watch.reason, watch.rank) from None
        raise Interrupted(stop.sigval) from None
    except ChildFailedError as error:
        # A worker that left unfinished makes its peers fail (their collectives lose it):
        # it is the cause, even when the agent noticed a peer first.
        unfinished = watch.unfinished_exit()
        if unfinished is not None:
            raise WorkersFailed(unfinished[1], unfinished[0]) from None
        raise WorkersFailed(first_failure(error), root_failure(error)[0]) from None
    except RendezvousError as error:
        if rendezvous is None:
            raise
        raise RendezvousLost(rdzv.describe_failure(rendezvous, error)) from None
    except AttributeError as error:
        # A node that joins a job already formed without it waits as a spare until that job
        # ends; torch's agent then returns no result, and its launcher fails on that None.
        if rendezvous is None or "is_failed" not in str(error):
            raise
        raise rdzv.RendezvousFailed(rdzv.formed_without_this_node(rendezvous)) from None
    finally:
        # The workers' logs and error files have been read by now (the reason of a failure
        # is in the exception); keeping them would leave a directory per run in /tmp.
        shutil.rmtree(log_dir, ignore_errors=True)


class _QuietWhileStopping(logging.Filter):
    """Drops the agent's warnings while it handles a stop signal or Ctrl-C.

    ("Received 15 death signal, shutting down workers", "Closing process N via signal
    SIGTERM".) The command says in one line of its own that it was interrupted. They are
    logged from inside the agent's exception handler, so the exception being handled tells
    them apart from the same warnings in other circumstances; errors always pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        return not isinstance(sys.exc_info()[1], (SignalException, KeyboardInterrupt))


@contextmanager
def _quiet_agent_shutdown() -> Iterator[None]:
    """Install `_QuietWhileStopping` on the handlers that print PyTorch's elastic logs."""
    quiet = _QuietWhileStopping()
    handlers: list[logging.Handler] = []
    logger: logging.Logger | None = logging.getLogger("torch.distributed.elastic.agent")
    while logger is not None:  # the handlers a record of the agent's reaches
        handlers.extend(h for h in logger.handlers if h not in handlers)
        logger = logger.parent if logger.propagate else None
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(quiet)


class _WorkerRaised(logging.Filter):
    """Drops the elastic launcher's log of a worker that raised an exception.

    ("failed (exitcode: 1) local_rank: 0 ... of fn: worker_main", then the worker's whole
    traceback again, one prefixed line each.) The worker has printed its traceback itself
    (an error of trainscale's) or saved it to a file (an error of the user's code, whose
    one line the command prints); the failure reaches the command as WorkersFailed either
    way. A worker that died otherwise (a signal, an exit status) has no traceback worth
    showing: torch's log of it is a traceback of its own monitor, and the command's one line
    names the signal or status and what the worker was doing.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        raised = record.exc_info[1] if record.exc_info else None
        if isinstance(raised, (ProcessRaisedException, ProcessExitedException)):
            return False
        # ("Terminating process N via signal SIGTERM": the failed worker's peers are
        # stopped because it failed, which the command's one line says.)
        return record.msg != "Terminating process %s via signal SIGTERM"


@contextmanager
def _no_second_traceback() -> Iterator[None]:
    """Install `_WorkerRaised` on the loggers of the launcher's worker processes."""
    loggers = [
        logging.getLogger("torch.distributed.elastic.multiprocessing.api"),
        logging.getLogger("torch.multiprocessing.spawn"),
    ]
    quiet = _WorkerRaised()
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)
