"""A worker whose process ends with status 0 before it returns (the workload called
`os._exit(0)`) fails the launch with its rank, instead of leaving it waiting forever."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from trainscale.parallel.interrupts import Interrupted
from trainscale.parallel.launcher import WorkersFailed, launch_workers

BOUND_S = 40
"""Well past the watch's grace (2 s) plus starting spawned workers on a busy machine."""


def leave_early(leaver: int) -> int:
    """Worker body: the worker of local rank `leaver` ends its process with status 0."""
    rank = int(os.environ["RANK"])
    if rank == leaver:
        os._exit(0)
    return rank


def bounded_launch(workers: int) -> dict[int, Any]:
    """`launch_workers(leave_early, (0,), workers)`, stopped as by SIGTERM after BOUND_S
    (a test failure, not a test run that never ends)."""
    previous = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGTERM))
    signal.alarm(BOUND_S)
    try:
        return launch_workers(leave_early, (0,), workers, shutdown_timeout_s=1)
    except Interrupted:
        pytest.fail(f"the launch was still waiting after {BOUND_S} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_that_ends_unfinished_fails_the_launch_with_its_rank(workers):
    started = time.monotonic()
    with pytest.raises(WorkersFailed) as failed:
        bounded_launch(workers)
    assert time.monotonic() - started < BOUND_S
    assert failed.value.rank == 0
    assert failed.value.reason.startswith("worker rank 0 (pid ")
    assert failed.value.reason.endswith(
        "ended (exit status 0) without finishing its work: the workload ended the process "
        "(os._exit?)"
    )
