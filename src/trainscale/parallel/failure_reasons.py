"""The one line a failed multi-worker run is stored with, from torch's ChildFailedError.

Which worker started the failure (`root_failure`), and what it said (`detail`): the
informative line of its error message, or, for a worker that died by a signal or an exit
status with no Python error, the signal's name and what the worker was doing then (the
phase it noted, `breadcrumbs`).
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from trainscale.errors import capped_reason
from trainscale.parallel.breadcrumbs import noted_phase

PEER_LOST = re.compile(
    r"connection (reset|closed|refused)|broken pipe|peer|gloo .*failed|nccl .*error",
    re.IGNORECASE,
)
"""What a worker says when another one went away first: a consequence, not the cause."""

TRAILER = re.compile(
    r"^\s*(\[\[\{\{node .*\}\}\]\]|\[Op:\S*\]|"
    r"The error could be from a previous operation|Restart your program|"
    r"Additional GRPC error information|Detected at node|"
    r"To enable traceback|Traceback \(most recent call last\)|For simplicity, JAX has removed)",
)
"""Lines of a framework's multi-line message that say where, not what: TensorFlow's
`[[{{node CollectiveReduceV2}}]]` and `[Op:...]`, its advice to restart, JAX's note on
filtered frames."""

ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\w*): ")
"""The `Type: ` an exception's first line starts with."""

NO_PYTHON_ERROR = re.compile(r"^(To enable traceback|Signal \d+ \(\w+\) received by PID)")
"""What torch says itself when the worker left no error file (a signal, a bare exit)."""


def detail(message: object) -> str:
    """The informative line of a worker's error message, with its exception's type.

    The last line of a Python error is usually its one line; a framework's multi-line
    message (TensorFlow's 'Collective ops is aborted by: ...' over several lines) ends with
    trailers that only locate it, which are skipped.
    """
    while isinstance(message, dict):  # the error file's structured form nests "message"
        message = message.get("message", "")
    # An error raised inside a C++ callback (a DDP comm hook) ends with an "At:" list of
    # Python frames; the message is what comes before it.
    raw = [line for line in str(message or "").split("\nAt:\n")[0].splitlines() if line.strip()]
    if not raw:
        return ""
    # Indented lines are frames of a stack ("  File ..."); they never say what failed.
    told = [line for line in raw if not line[:1].isspace() and not TRAILER.match(line)]
    chosen = (told or raw)[-1].strip()
    kind = ERROR_TYPE.match(raw[0].strip())
    if kind and chosen != raw[0].strip() and not ERROR_TYPE.match(chosen):
        return capped_reason(f"{kind.group(1)}: {chosen}")
    return capped_reason(chosen)


def root_failure(error: ChildFailedError) -> tuple[int, Any]:
    """The failure that started it.

    A worker that lost its peer ("connection reset by peer", "Gloo all-reduce failed") is a
    consequence, so it gives way to any worker that failed with an error of its own, whatever
    their timestamps: each worker stamps its error when it writes its error file, after its
    own clean-up, so the peer that crashed can be stamped a second after the one it broke.
    Among the rest the earliest wins, as torch picks it (whole seconds, a tie to the lowest
    rank).
    """
    ranks = list(error.failures)
    causes = [r for r in ranks if not PEER_LOST.search(detail(error.failures[r].message))]
    if not causes:
        unreported = unreported_cause(error)
        if unreported is not None:
            return unreported
    rank = min(causes or ranks, key=lambda r: (error.failures[r].timestamp, r))
    return rank, error.failures[rank]


def unreported_cause(error: ChildFailedError) -> tuple[int, Any] | None:
    """A worker of this node that torch did not report, with an error of its own.

    The agent reports the workers that have exited when it notices a failure. A worker that
    raised can still be shutting down (a framework's distributed client closing) when the
    peer it broke has already exited with "connection reset by peer"; the agent then reports
    only the peer and stops the rest. The one that raised has written its error file by
    then (torch's `record` writes it before the exception leaves the worker), beside the
    reported ones: `<attempt>/<local rank>/error.json`. Reading them is what torch would have
    done had it waited for that worker.
    """
    reported = [
        (rank, failure)
        for rank, failure in error.failures.items()
        if Path(str(getattr(failure, "error_file", ""))).is_file()
    ]
    if not reported:
        return None
    rank, failure = reported[0]
    offset = rank - int(failure.local_rank)  # global rank of local rank 0 on this node
    attempt = Path(failure.error_file).parent.parent
    for path in sorted(attempt.glob("*/error.json")):
        if not path.parent.name.isdigit():
            continue
        local_rank = int(path.parent.name)
        if local_rank + offset in error.failures:
            continue
        try:
            other = ProcessFailure(local_rank=local_rank, pid=-1, exitcode=1, error_file=str(path))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # half-written or foreign: the reported failure still tells the run
        if other.message and not PEER_LOST.search(detail(other.message)):
            return local_rank + offset, other
    return None


def signal_name(number: int) -> str:
    """'SIGABRT' for 6; 'signal 99' for a number this system does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def death(exitcode: int | None, rank: int, pid: int) -> str:
    """How worker `rank` (process `pid`) ended without a Python error, and what it was doing
    then, if it noted it: 'killed by SIGABRT while joining the TensorFlow cluster; ...'."""
    if exitcode is not None and exitcode < 0:
        how = f"killed by {signal_name(-exitcode)}"
    else:
        how = f"exit code {exitcode}"
    noted = noted_phase(rank, pid)
    if noted is None:
        return how
    phase, source = noted
    where = f"; {source}'s own message is in the output above" if source else ""
    return f"{how} while {phase}{where}"


def first_failure(error: ChildFailedError) -> str:
    """One line for the run's stored reason: 'worker rank R (pid N) failed: what it said'."""
    rank, failure = root_failure(error)
    said = detail(failure.message)
    if not said or NO_PYTHON_ERROR.match(said):
        said = death(failure.exitcode, rank, failure.pid)
    # A worker found by its error file alone (`unreported_cause`) has no known pid.
    pid = f" (pid {failure.pid})" if failure.pid > 0 else ""
    return f"worker rank {rank}{pid} failed: {said}"
