"""A one-node rendezvous whose only listening socket is on the loopback interface.

`torchrun --standalone` (c10d on 127.0.0.1:0) listens on every interface twice over: the
rendezvous TCPStore and the store it then shares with the workers (MASTER_ADDR:MASTER_PORT)
both bind the wildcard address, whatever host is named, so a single-machine run opens ports
to the network. Here the rendezvous state lives in an in-process store (this agent is the
only node: nothing has to reach it), and the workers' store is served on a socket bound to
127.0.0.1 that is handed to TCPStore ready-made (its `master_listen_fd`). The elastic agent,
its restarts and its shutdown are PyTorch's own: only where the sockets listen changes.

gloo's own listening sockets are pinned to the loopback interface by the worker
(`pin_gloo_to_loopback`), since only the process that creates the process group can.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import psutil
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import rendezvous_handler_registry
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler

LOOPBACK = "127.0.0.1"
BACKEND = "trainscale-loopback"
"""The rendezvous backend name a LaunchConfig uses for a one-node run."""


def register() -> None:
    """Make `BACKEND` known to PyTorch's rendezvous registry (again: a no-op)."""
    rendezvous_handler_registry.register(BACKEND, _create_handler)


def serve_store(port: int = 0) -> Any:
    """A TCPStore server listening on 127.0.0.1 only (port 0: the system picks one)."""
    listener = socket.create_server((LOOPBACK, port))
    # detach(): the store owns the descriptor from here on and closes it itself.
    return dist.TCPStore(
        LOOPBACK,
        listener.getsockname()[1],
        is_master=True,
        multi_tenant=True,
        master_listen_fd=listener.detach(),
    )


def _create_handler(params: Any) -> Any:
    class LoopbackBackend(C10dRendezvousBackend):
        @property
        def name(self) -> str:  # the registry checks it against the requested backend
            return BACKEND

    class LoopbackHandler(DynamicRendezvousHandler):
        def _create_tcp_store_server(self, *args: Any) -> Any:
            # PyTorch 2.4 passes the bootstrap info (its port chosen already); later
            # releases (address, port) with port 0. Either way: loopback only.
            port = args[0].master_port if len(args) == 1 else args[1]
            return serve_store(int(port or 0))

    store = dist.HashStore()
    return LoopbackHandler.from_backend(
        params.run_id,
        store,
        LoopbackBackend(store, params.run_id),
        params.min_nodes,
        params.max_nodes,
        LOOPBACK,  # the workers' MASTER_ADDR
    )


def loopback_interface() -> str:
    """The name of the interface that carries 127.0.0.1 ('lo' on Linux)."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == LOOPBACK for a in addresses):
            return name
    return "lo"


def pin_gloo_to_loopback() -> None:
    """Have gloo listen on the loopback interface: for workers that all share one machine.

    gloo otherwise binds the address this machine's host name resolves to, often one on
    the network. An explicit GLOO_SOCKET_IFNAME is the user's choice and stays.
    """
    os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback_interface())
