"""Several nodes in one job: the rendezvous endpoint, the job's id, and the errors of joining.

Every node runs the same `trainscale run --nnodes N --rdzv-endpoint HOST:PORT --rdzv-id ID`.
PyTorch's elastic agent on each node joins a c10d rendezvous at HOST:PORT (a TCP store
hosted by the node whose address HOST is); once N nodes have joined, every agent starts its
workers with global ranks. This module holds what trainscale adds around that engine:
parsing and checking the endpoint, a default job id under SLURM, waiting (boundedly) for an
endpoint hosted elsewhere, one-line errors instead of the store's C++ retry log, and the
network interface gloo uses where the host name would give it a loopback address.

Nothing here imports torch at module level: the CLI validates options before torch loads.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import math
import os
import re
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import psutil
from torch.distributed.elastic.rendezvous import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousTimeoutError,
)

from trainscale.errors import ConfigError, TrainscaleError
from trainscale.parallel import stuck_stop

log = logging.getLogger(__name__)

DEFAULT_RDZV_TIMEOUT_S = 300.0
"""How long a node waits for the endpoint and for the other nodes to join, by default."""

RDZV_EXIT_CODE = 3
"""Exit status when the nodes could not form the job (endpoint unreachable, peers missing).

Distinct from 2 (a mistake in the command: fix it) and 1 (the run started and failed, and
is stored as failed): nothing ran and nothing was stored, so the same command may simply be
retried once every node is up.
"""

_HOST_PATTERN = re.compile(r"^[\w.-]+$")


class RendezvousFailed(TrainscaleError):
    """The nodes did not form the job: no worker started anywhere and nothing was stored."""

    exit_code = RDZV_EXIT_CODE


@dataclass(frozen=True)
class Rendezvous:
    """Where and how the nodes of one job meet (c10d rendezvous)."""

    endpoint: str
    """HOST:PORT of the rendezvous store; the node whose address is HOST hosts it."""
    job_id: str
    """Shared by the nodes of one job and by no other job at the same endpoint."""
    nnodes: int
    """Nodes that must join before any worker starts (elastic min = max)."""
    timeout_s: float
    """How long a node waits for the endpoint and the other nodes."""


def parse_endpoint(text: str) -> tuple[str, int]:
    """'HOST:PORT' -> (host, port); IPv6 addresses in brackets ('[fd00::1]:29500').

    The port is required (every node must name the same one) and must be in 1..65535.
    """
    value = (text or "").strip()
    hint = "--rdzv-endpoint must be HOST:PORT, e.g. node001:29500 or 10.0.0.1:29500"
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{hint}; got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        valid_host = bool(host) and all(c in "0123456789abcdefABCDEF:." for c in host)
    else:
        valid_host = bool(_HOST_PATTERN.match(host))
        if ":" in host:
            raise ConfigError(f"{hint} (IPv6 addresses in brackets: [fd00::1]:29500); got {text!r}")
    if not valid_host:
        raise ConfigError(f"{hint}; {host!r} is not a host name or address")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ConfigError(f"{hint}; the port must be a number in 1..65535, got {port_text!r}")
    return host, int(port_text)


def default_job_id(environ: Mapping[str, str]) -> str | None:
    """The job id every node of a SLURM job step agrees on, or None outside SLURM.

    Each `srun` gets its own step id, so two runs in one allocation never share a rendezvous.
    """
    job = environ.get("SLURM_JOB_ID", "").strip()
    if not job:
        return None
    step = environ.get("SLURM_STEP_ID", "").strip() or "batch"
    return f"slurm-{job}-{step}"


def check_job_id(job_id: str) -> None:
    """A job id is a non-empty word: it becomes a key prefix in the rendezvous store."""
    if not job_id.strip() or any(c.isspace() for c in job_id):
        raise ConfigError(f"--rdzv-id must be a non-empty word without spaces, got {job_id!r}")


def store_role(rendezvous: Rendezvous) -> tuple[bool, bool | None]:
    """(whether this node will host the rendezvous store, the `is_host` to tell the agent).

    The c10d backend guesses by matching HOST against this machine's host name and what it
    resolves to; on a match it tries to host, and connects as a client if another agent on
    this machine already does. It misses an address on an interface the host name does not
    resolve to (a second network, a container or network namespace): then no node would
    host and every node would wait for nobody. Checking the interfaces covers that case;
    `is_host` is only set there (None: the agent's own guess stands).
    """
    host, port = parse_endpoint(rendezvous.endpoint)
    if _agent_would_host(host):
        return True, None
    if not _is_local_address(host):
        return False, None
    hosted_here_already = _accepts_connections(host, port)  # another node on this machine
    return not hosted_here_already, not hosted_here_already


def _agent_would_host(host: str) -> bool:
    try:
        from torch.distributed.elastic.rendezvous.utils import (  # noqa: PLC0415 (private to torch)
            _matches_machine_hostname,
        )
    except ImportError:  # moved in some torch release: the common cases
        return host in ("localhost", socket.gethostname()) or host.startswith("127.")
    try:
        return bool(_matches_machine_hostname(host))
    except OSError:
        return False


def _is_local_address(host: str) -> bool:
    """Whether HOST (a name or an address) is an address of one of this machine's interfaces."""
    try:
        wanted = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except OSError:
        return False
    ours = {
        address.address.split("%")[0]
        for addresses in psutil.net_if_addrs().values()
        for address in addresses
        if address.family in (socket.AF_INET, socket.AF_INET6)
    }
    return bool(wanted & ours)


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_for_endpoint(rendezvous: Rendezvous, deadline: float) -> None:
    """Return once HOST:PORT accepts a TCP connection; RendezvousFailed at `deadline`.

    The store's own client retries with a C++ log line per attempt; a plain socket loop says
    the same thing once, naming the endpoint. The probe connects and closes at once, which
    the store's server ignores.
    """
    host, port = parse_endpoint(rendezvous.endpoint)
    last_error = "no answer"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RendezvousFailed(
                f"cannot reach the rendezvous endpoint {rendezvous.endpoint} within "
                f"{rendezvous.timeout_s:g} s (--rdzv-timeout): {last_error}; start the node "
                f"at {host} first, or check the address, port and firewall"
            )
        try:
            with socket.create_connection((host, port), timeout=min(remaining, 2.0)):
                return
        except socket.gaierror as error:
            last_error = f"cannot resolve {host!r} ({error.strerror or error})"
        except OSError as error:
            last_error = error.strerror or str(error) or type(error).__name__
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))


def _tcp_addresses(host: str) -> list[str]:
    """The addresses HOST resolves to for TCP, in the resolver's order; [] if none."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in found]


def _can_bind(address: str) -> bool:
    """Whether a TCP socket can bind ADDRESS (port 0) on this machine, as gloo checks."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
            return True
    except OSError:
        return False


def _interface_addresses() -> dict[str, list[str]]:
    """Each network interface's IPv4 and IPv6 addresses (scope suffixes dropped)."""
    return {
        name: [
            a.address.split("%")[0]
            for a in addresses
            if a.family in (socket.AF_INET, socket.AF_INET6)
        ]
        for name, addresses in psutil.net_if_addrs().items()
    }


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def local_address(rendezvous: Rendezvous) -> str | None:
    """This node's address as the other nodes should see it: the one it reaches HOST from.

    The elastic agent otherwise names a node by `socket.getfqdn()`, and the node that gets
    rank 0 hands that name to every worker as MASTER_ADDR. On machines whose host name only
    resolves locally (or to 127.0.1.1) that name is useless to the others; the source
    address of the route to the endpoint is on the network they share.
    """
    return _route_source(*parse_endpoint(rendezvous.endpoint))


def _route_source(host: str, port: int) -> str | None:
    """The local address this machine sends from to HOST:PORT; None without a route.

    No packet is sent (a UDP socket's connect only picks the route).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.connect(address)
            return str(probe.getsockname()[0])
    except OSError:
        return None  # let the agent fall back to its own choice


GLOO_IFNAME = "GLOO_SOCKET_IFNAME"
"""The variable naming the network interface gloo listens on (and advertises to its peers)."""


@dataclass(frozen=True)
class GlooInterface:
    """What the workers' gloo should listen on in a run over several nodes."""

    name: str | None = None
    """The interface to give the workers as GLOO_SOCKET_IFNAME; None: leave gloo's choice."""
    note: str | None = None
    """One line for the user when gloo's own choice would not reach the other nodes."""


def gloo_interface(
    endpoint: str,
    environ: Mapping[str, str],
    *,
    hostname: Callable[[], str] = socket.gethostname,
    resolve: Callable[[str], list[str]] = _tcp_addresses,
    can_bind: Callable[[str], bool] = _can_bind,
    route_source: Callable[[str, int], str | None] = _route_source,
    interfaces: Callable[[], Mapping[str, list[str]]] = _interface_addresses,
) -> GlooInterface:
    """Whether gloo would advertise a loopback address to the other nodes, and what then.

    Without GLOO_SOCKET_IFNAME, gloo (torch's default device) listens on the first address
    the host name resolves to (TCP, any family) that it can bind, or on 127.0.0.1 when
    there is none, and tells its peers that address. Where the host name resolves to
    127.0.x.x (common: Debian's 127.0.1.1), the other nodes would connect to their own
    loopback and the job would fail after a timeout. Then the interface carrying this
    node's route to the rendezvous endpoint is on the network the nodes share: the workers
    get it as GLOO_SOCKET_IFNAME. The user's own GLOO_SOCKET_IFNAME always stands, and an
    endpoint on loopback (every node on this machine) needs nothing.
    """
    if environ.get(GLOO_IFNAME, "").strip():
        return GlooInterface()
    host, port = parse_endpoint(endpoint)
    endpoint_addresses = resolve(host)
    if not endpoint_addresses or all(_is_loopback(a) for a in endpoint_addresses):
        return GlooInterface()  # unresolvable (said when waiting for it) or one machine
    name = hostname()
    gloo_address = next((a for a in resolve(name) if can_bind(a)), "127.0.0.1")
    if not _is_loopback(gloo_address):
        return GlooInterface()
    problem = (
        f"gloo would listen on {gloo_address}, the loopback address host name {name!r} "
        "resolves to, which the other nodes cannot reach"
    )
    source = route_source(host, port)
    owner = None
    if source is not None and not _is_loopback(source):
        wanted = source.split("%")[0]
        owner = next((i for i, addresses in interfaces().items() if wanted in addresses), None)
    if owner is None:
        return GlooInterface(
            note=f"{problem}: set {GLOO_IFNAME}=<interface> on every node, the interface on "
            f"the network the nodes share (the one that reaches {host})"
        )
    return GlooInterface(
        name=owner,
        note=f"{problem}: the workers use {GLOO_IFNAME}={owner} ({source}, the interface "
        f"that reaches {host}) instead; set {GLOO_IFNAME} to choose another",
    )


@contextlib.contextmanager
def gloo_for_workers(
    endpoint: str | None, uses_gloo: bool = True, say: bool = True
) -> Iterator[GlooInterface]:
    """While this node's workers start (or, under an external launcher, while this worker
    forms its process group): GLOO_SOCKET_IFNAME in this process's environment (spawned
    workers inherit it) where `gloo_interface` picks one for ENDPOINT (HOST:PORT, where the
    nodes meet), said in one warning line unless `say` is off; the environment as it was
    afterwards. Runs whose collectives are not gloo's (NCCL on GPUs) are left alone."""
    choice = GlooInterface()
    if uses_gloo and endpoint:
        choice = gloo_interface(endpoint, os.environ)
    if choice.note and say:
        log.warning(choice.note)
    before = os.environ.get(GLOO_IFNAME)  # unset, or blank
    if choice.name:
        os.environ[GLOO_IFNAME] = choice.name
    try:
        yield choice
    finally:
        if choice.name:
            if before is None:
                os.environ.pop(GLOO_IFNAME, None)
            else:
                os.environ[GLOO_IFNAME] = before


def master_endpoint(environ: Mapping[str, str]) -> str | None:
    """MASTER_ADDR:MASTER_PORT as an endpoint (IPv6 in brackets), as an external launcher
    sets them for its workers; None where they are missing or not an address and port."""
    host, port = environ.get("MASTER_ADDR", "").strip(), environ.get("MASTER_PORT", "").strip()
    endpoint = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        parse_endpoint(endpoint)
    except ConfigError:
        return None
    return endpoint


def launch_settings(rendezvous: Rendezvous) -> dict[str, Any]:
    """The elastic LaunchConfig fields that make this node one of `rendezvous.nnodes`.

    Waits first for an endpoint that another node hosts (RendezvousFailed if it does not
    answer within the timeout), then leaves what is left of the timeout to the join. Every
    call on the rendezvous store is bounded (`store_call_settings`), and a stop signal is
    obeyed even while the agent waits inside one (`stuck_stop.install`).
    """
    deadline = time.monotonic() + rendezvous.timeout_s
    # The agent's main thread waits in C++ store calls, where Python cannot run a signal
    # handler, and which torch does not always bound: a stop signal must still end the
    # node, and a call left unanswered well past its timeout is cut (see stuck_stop).
    host, port = parse_endpoint(rendezvous.endpoint)
    limit_s = store_call_timeout(rendezvous) + STORE_CALL_GRACE_S
    stuck_stop.watch_store_calls(_tcp_addresses(host), port, limit_s)
    hosting, is_host = store_role(rendezvous)
    if not hosting:
        # Waiting here, in Python, makes an unreachable endpoint cost one line rather than
        # the store client's retry log.
        wait_for_endpoint(rendezvous, deadline)
    # join_timeout bounds the wait for the other nodes (whole seconds); the endpoint wait is
    # taken off it, so the whole wait stays within the timeout.
    configs: dict[str, Any] = {
        "join_timeout": max(1, math.ceil(deadline - time.monotonic())),
        **store_call_settings(rendezvous),
    }
    if is_host is not None:
        configs["is_host"] = is_host
    return {
        "min_nodes": rendezvous.nnodes,  # min = max: the job starts with all its nodes
        "max_nodes": rendezvous.nnodes,
        "run_id": rendezvous.job_id,
        "rdzv_endpoint": rendezvous.endpoint,
        "rdzv_configs": configs,
        "local_addr": local_address(rendezvous),
    }


STORE_CALL_TIMEOUT_MAX_S = 30
"""The longest one call on the rendezvous store may wait for an answer.

The rendezvous only reads and compare-and-sets one key (it polls; it never blocks on the
store waiting for another node), so a live store answers in milliseconds: a call that waits
longer is waiting on a node that stopped answering without closing its connection (its link
went down, its machine froze). torch's defaults would let each such call wait 60 s, and
closing the rendezvous retry several of them.
"""

STORE_CALL_GRACE_S = 5
"""How long past its own timeout a store call may last before its connection is cut."""

KEEP_ALIVE_INTERVAL_S = 5
KEEP_ALIVE_MAX_ATTEMPTS = 3
"""A node that sent no heartbeat for interval x attempts (15 s) is taken for dead."""


def store_call_timeout(rendezvous: Rendezvous) -> int:
    """Seconds one rendezvous store call waits: the rendezvous timeout, at most 30 s."""
    return max(1, min(STORE_CALL_TIMEOUT_MAX_S, math.ceil(rendezvous.timeout_s)))


def store_call_settings(rendezvous: Rendezvous) -> dict[str, int]:
    """The c10d rendezvous settings that bound every wait of the agent on the store.

    `read_timeout` is the store client's timeout (each get, set, compare-and-set; torch's
    default 60 s); `close_timeout` bounds closing the rendezvous when the run ends or fails
    (default 30 s; its calls would otherwise retry until then); `heartbeat_timeout` bounds a
    keep-alive's own store call, and the keep-alive settings say when a silent node counts as
    gone. A node whose store host stops answering fails after about two store calls (the
    keep-alive's or the agent's read, then the close), each cut `STORE_CALL_GRACE_S` past
    its timeout where torch's client outlasts it (`stuck_stop.watch_store_calls`).
    """
    seconds = store_call_timeout(rendezvous)
    return {
        "read_timeout": seconds,
        "close_timeout": seconds,
        "heartbeat_timeout": min(seconds, KEEP_ALIVE_INTERVAL_S),
        "keep_alive_interval": KEEP_ALIVE_INTERVAL_S,
        "keep_alive_max_attempt": KEEP_ALIVE_MAX_ATTEMPTS,
    }


_TIMED_OUT = re.compile(r"time(d)?[ -]?out", re.IGNORECASE)
"""How the store client's errors say that no answer came in time (c10d's wording varies)."""


def formed_without_this_node(rendezvous: Rendezvous) -> str:
    """The line of a node that joined a job its other nodes had already formed."""
    return (
        f"the job at {rendezvous.endpoint} (--rdzv-id {rendezvous.job_id}) formed with its "
        f"{rendezvous.nnodes} nodes without this one, and has ended: this node ran nothing; "
        "start every job with a new --rdzv-id"
    )


def describe_failure(rendezvous: Rendezvous, error: BaseException) -> str:
    """One line for a rendezvous error the elastic agent raised (joining, or mid-run)."""
    where = f"the rendezvous at {rendezvous.endpoint} (--rdzv-id {rendezvous.job_id})"
    if isinstance(error, RendezvousTimeoutError):
        return (
            f"{where} did not complete within {rendezvous.timeout_s:g} s (--rdzv-timeout): "
            f"{rendezvous.nnodes} nodes must join, each with the same --nnodes, "
            "--rdzv-endpoint and --rdzv-id"
        )
    if isinstance(error, RendezvousClosedError):
        # Closed by a job that ran, or by its host giving up before the others joined: a
        # closed rendezvous cannot tell which.
        return (
            f"{where} is closed: a job with this id ended there (start a new one with a new "
            f"--rdzv-id), or the node hosting it gave up before {rendezvous.nnodes} nodes "
            "joined (each needs the same --nnodes, --rdzv-endpoint and --rdzv-id)"
        )
    if isinstance(error, RendezvousConnectionError):
        cause = error.__cause__ or error
        if stuck_stop.cut_endpoint() or _TIMED_OUT.search(str(cause)):
            return (
                f"{where} stopped answering (no reply within {store_call_timeout(rendezvous)} s): "
                "the node hosting it, or the network link to it, is down"
            )
        return f"the connection to {where} failed: {first_line(cause)}"
    return f"{where} failed: {type(error).__name__}: {first_line(error)}"


def first_line(error: BaseException) -> str:
    """An exception's message, first line only (c10d appends C++ stack traces)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
