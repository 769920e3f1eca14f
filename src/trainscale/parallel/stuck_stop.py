"""A stop signal obeyed while the main thread is stuck inside a C++ call.

Python runs a signal handler in the main thread, between two bytecodes. While that thread
waits inside torch's C++ store client (a rendezvous store whose node stopped answering
without closing the connection: up to the store call's timeout, or up to 300 s in the
elastic agent's exit barrier), SIGTERM and Ctrl-C are noted but not handled, and the node
ignores them for as long as the call lasts.

Python's own C-level handler still writes each signal to the wakeup file descriptor
(`signal.set_wakeup_fd`) at once. A thread reading it checks, a grace period later, whether
the main thread has moved at all: the same frame at the same instruction means the handler
never ran. Then the thread does what the handler would have: it stops this process's
workers (the signal, then SIGKILL after a grace period) and ends the process with status
128 + N, after one line. A main thread that is handling the signal (or anything else) is
left alone.

Nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from types import FrameType
from typing import Any

import psutil

from trainscale.parallel.interrupts import STOP_SIGNALS, interrupted_reason

GRACE_S = 2.0
"""How long the main thread has to start handling a stop signal before it counts as stuck."""

KILL_AFTER_S = 5.0
"""How long the workers have to leave after the stop signal before SIGKILL."""

_installed = False


def install(grace_s: float = GRACE_S, kill_after_s: float = KILL_AFTER_S) -> bool:
    """Watch for stop signals that the main thread cannot handle, once per process.

    Returns whether the watch runs: not where it is called outside the main thread (only
    the main thread may set the wakeup descriptor) or where something else already uses
    the wakeup descriptor (an asyncio loop: its signals are left to it).
    """
    global _installed
    if _installed:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    reader, writer = socket.socketpair()
    writer.setblocking(False)  # as set_wakeup_fd requires: a full buffer never blocks
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    if previous != -1:
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
        return False
    main = threading.main_thread().ident
    watch = threading.Thread(
        target=_watch,
        args=(reader, writer, main, grace_s, kill_after_s),
        name="trainscale-stuck-stop",
        daemon=True,
    )
    watch.start()
    threading.Thread(target=_watch_stores, name="trainscale-store-watch", daemon=True).start()
    _installed = True
    return True


def _watch(
    reader: socket.socket,
    writer: socket.socket,
    main: int | None,
    grace_s: float,
    kill_after_s: float,
) -> None:
    del writer  # kept open for as long as the wakeup descriptor points at it
    while True:
        received = reader.recv(64)
        if not received:
            return
        stops = [signum for signum in received if signum in STOP_SIGNALS]
        if not stops:
            continue
        before = _position(main)
        time.sleep(grace_s)
        if before is not None and _position(main) == before:
            _stop(signal.Signals(stops[0]), kill_after_s)


def _position(thread_id: int | None) -> tuple[FrameType, int] | None:
    """Where a thread is: its innermost Python frame and instruction (None: not running)."""
    frame = sys._current_frames().get(thread_id) if thread_id is not None else None
    return None if frame is None else (frame, frame.f_lasti)


def _stop(signum: signal.Signals, kill_after_s: float) -> None:
    """Stop every process below this one, then end this one with status 128 + N."""
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        children = []
    for child in children:
        with contextlib.suppress(psutil.Error):  # already gone
            child.send_signal(signum)
    _, alive = psutil.wait_procs(children, timeout=kill_after_s)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    print(
        f"trainscale: {interrupted_reason(signum)}: the workers were stopped while the agent "
        "waited on a store that stopped answering",
        file=sys.stderr,
        flush=True,
    )
    os._exit(128 + int(signum))  # the main thread cannot be reached to unwind


STORE_CALL = ("c10d_rendezvous_backend.py", "_call_store")
"""The frame (file name, function) of the elastic agent's calls on the rendezvous store."""

_cut: list[str] = []
"""The store connections cut so far (ADDRESS:PORT)."""

_store_watch: dict[str, Any] = {}
"""The store whose calls are watched: its addresses, its port, the limit in seconds."""


def watch_store_calls(addresses: list[str], port: int, limit_s: float) -> None:
    """Cut the connection to the rendezvous store under a call that has waited `limit_s`.

    torch's store client bounds a read by its timeout, but a call on a server that stopped
    answering (connection open, no reply) can outlast it: torch 2.13's client logs the
    timeout and then waits on that server again, without a bound. Shutting the socket down
    makes the call fail
    as if the node had closed the connection, so the agent fails the run through its usual
    path (workers stopped, the run recorded). `addresses` and `port`: the store's endpoint.
    """
    if not install():  # the same thread watches; it is started once per process
        return
    _store_watch.update(addresses={_plain(a) for a in addresses}, port=port, limit_s=limit_s)


def cut_endpoint() -> str | None:
    """'ADDRESS:PORT' of a store connection this process cut because it stopped answering."""
    return _cut[-1] if _cut else None


def _plain(address: str) -> str:
    """An address as psutil reports it, without IPv4-mapped IPv6 or scope decoration."""
    address = address.split("%")[0]
    return address.removeprefix("::ffff:")


def _store_call(frame: FrameType | None) -> FrameType | None:
    """The frame of a rendezvous store call among a thread's frames, if it is in one."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename.endswith(STORE_CALL[0]) and code.co_name == STORE_CALL[1]:
            return frame
        frame = frame.f_back
    return None


def _watch_stores() -> None:
    """Every second: each thread's store call (the agent's, its keep-alive's), and how long
    it has lasted; one past the limit has its connection cut."""
    calls: dict[int, tuple[FrameType, float]] = {}
    while True:
        time.sleep(1.0)
        if not _store_watch:
            continue
        now, seen = time.monotonic(), {}
        for thread_id, frame in sys._current_frames().items():
            call = _store_call(frame)
            if call is None:
                continue
            known = calls.get(thread_id)
            seen[thread_id] = known if known is not None and known[0] is call else (call, now)
        calls = seen
        if any(now - since >= _store_watch["limit_s"] for _, since in calls.values()):
            _shut_down_store_connections(_store_watch["addresses"], _store_watch["port"])
            # A call that reconnects gets the same bound again.
            calls = {thread_id: (call, now) for thread_id, (call, _) in calls.items()}


def _shut_down_store_connections(addresses: set[str], port: int) -> None:
    me = psutil.Process()
    listing = getattr(me, "net_connections", None) or me.connections
    for connection in listing(kind="tcp"):
        remote = connection.raddr
        if not remote or remote.port != port or _plain(remote.ip) not in addresses:
            continue
        try:
            # A duplicate of the descriptor shares the connection: shutting it down ends
            # the connection for the store client too (the descriptor itself stays its).
            with socket.socket(fileno=os.dup(connection.fd)) as duplicate:
                duplicate.shutdown(socket.SHUT_RDWR)
        except OSError:
            continue  # closed meanwhile
        _cut.append(f"{remote.ip}:{remote.port}")
