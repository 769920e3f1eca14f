"""A single-node run listens on the loopback interface only.

Every listening socket of the run's processes (the launcher's stores, gloo's sockets in each
worker) must be on 127.0.0.1 or ::1, also where the machine's host name resolves to an
address on the network (gloo binds that address unless told otherwise).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

START_TIMEOUT_S = 180
LOOPBACK = {"127.0.0.1", "::1"}


def network_address() -> str | None:
    """An IPv4 address of this machine that is not a loopback one, if there is any."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if (
                address.family == socket.AF_INET
                and not ipaddress.ip_address(address.address).is_loopback
            ):
                return address.address
    return None


def host_name_on_the_network(tmp_path: Path) -> list[str]:
    """A command prefix that runs its command under a host name resolving to a network
    address of this machine (private mount and UTS namespaces: nothing else sees it)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private host name")
    address = network_address()
    if address is None:
        pytest.skip("this machine has no network address besides loopback")
    name = f"ts-node-{uuid.uuid4().hex[:6]}"
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{address} {name}\n")
    prefix = [
        "unshare",
        "--mount",
        "--uts",
        "sh",
        "-c",
        'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"',
        str(hosts),
        name,
    ]
    probe = subprocess.run(
        [
            *prefix,
            sys.executable,
            "-c",
            "import socket; print(socket.gethostbyname(socket.gethostname()))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make a private host name here: {probe.stderr.strip()}")
    assert probe.stdout.strip() == address  # gloo, left alone, would bind this address
    return prefix


def listeners(processes: list[psutil.Process]) -> dict[int, list[str]]:
    """Each process's listening TCP sockets, as 'address:port'."""
    found: dict[int, list[str]] = {}
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            found[process.pid] = [
                f"{c.laddr.ip}:{c.laddr.port}"
                for c in process.net_connections("inet")
                if c.status == psutil.CONN_LISTEN
            ]
    return found


def workers_of(parent: psutil.Process) -> list[psutil.Process]:
    found = []
    for child in parent.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            line = " ".join(child.cmdline())
            if "multiprocessing.spawn" in line and "resource_tracker" not in line:
                found.append(child)
    return found


@pytest.mark.parametrize("host_name", ["as-is", "resolves-to-the-network"])
def test_a_two_worker_run_listens_on_loopback_only(tmp_path: Path, host_name: str) -> None:
    prefix = host_name_on_the_network(tmp_path) if host_name != "as-is" else []
    env = {k: v for k, v in os.environ.items() if k not in ("TRAINSCALE_FAULT_INJECT",)}
    env.pop("GLOO_SOCKET_IFNAME", None)  # the run must pin gloo itself
    cmd = [sys.executable, "-m", "trainscale", "run", "mnist-cnn", "--data", "synthetic"]
    cmd += ["--steps", "100000", "--no-eval", "--workers", "2", "--threads-per-worker", "1"]
    cmd += ["--allow-oversubscribe", "--quiet", "--store", str(tmp_path / "s.db")]
    proc = subprocess.Popen(
        [*prefix, *cmd],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + START_TIMEOUT_S
        # Wait until the launcher serves its store and both workers have set up gloo.
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the workers never formed their group"
            workers = workers_of(parent)
            sockets = listeners([parent, *workers])
            if len(workers) == 2 and all(sockets.get(p.pid) for p in [parent, *workers]):
                break
            time.sleep(0.2)
        everything = listeners([parent, *parent.children(recursive=True)])
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stderr.close()
    exposed = {
        pid: [s for s in found if s.rsplit(":", 1)[0] not in LOOPBACK]
        for pid, found in everything.items()
    }
    assert not any(exposed.values()), f"listening beyond loopback: {exposed}"
