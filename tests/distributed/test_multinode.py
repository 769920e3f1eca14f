"""Several nodes on one machine: launcher agents that meet over TCP (c10d rendezvous).

Each "node" is a separate `trainscale run --nnodes 2` (or torchrun) process with its own
elastic agent, exactly as on two machines; only the addresses are local. Where the machine
allows it (root, iproute2), two network namespaces joined by a veth pair give the nodes
different IP addresses, so nothing can pass between them except over that link.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from trainscale.cli import main
from trainscale.results.store import RunStore

pytestmark = pytest.mark.multinode

SYNTH = ["--data", "synthetic", "--batch-size", "8", "--threads-per-worker", "1", "--quiet"]
AGENT_TIMEOUT_S = 240  # a generous ceiling for a loaded CI machine; runs take seconds
# With --rdzv-timeout 20, a call on a rendezvous store that stopped answering fails after
# 20 s, or has its connection cut 5 s later where torch's client waits on; the agent's and
# its keep-alive's calls, then stopping the workers (5 s), fit in twice that and 10 s.
LINK_DOWN_BOUND_S = 2 * (20 + 5) + 10


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """No cache, fault injection or SLURM job id of the caller leaks into the nodes."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TRAINSCALE_FAULT_INJECT", "SLURM_JOB_ID", "SLURM_STEP_ID", "TRAINSCALE_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def job_id() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


def run_cmd(steps: int = 4) -> list[str]:
    """`trainscale run` of a tiny synthetic workload, as a module (as torchrun runs it too)."""
    return ["-m", "trainscale", "run", "mnist-cnn", *SYNTH, "--steps", str(steps)]


def node_cmd(steps: int = 4) -> list[str]:
    return [sys.executable, *run_cmd(steps)]


@dataclass
class Agent:
    """One node: its process, and where its output goes (files: a pipe could fill up)."""

    proc: subprocess.Popen
    out: Path
    err: Path
    started: float

    @property
    def stdout(self) -> str:
        return self.out.read_text()

    @property
    def stderr(self) -> str:
        return self.err.read_text()


def start_agent(cmd: list[str], tmp_path: Path, name: str, **env: str) -> Agent:
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            cmd,
            stdout=stdout,
            stderr=stderr,
            env={**os.environ, **env},
            cwd=tmp_path,
            start_new_session=True,  # so a test that fails can stop the whole node
        )
    return Agent(proc, out, err, time.monotonic())


def stop(agents: list[Agent]) -> None:
    """Kill what is left of the nodes (a test that passed leaves nothing)."""
    for agent in agents:
        if agent.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(agent.proc.pid, signal.SIGKILL)
            agent.proc.wait()


def wait_all(agents: list[Agent], timeout_s: float = AGENT_TIMEOUT_S) -> list[int]:
    deadline = time.monotonic() + timeout_s
    codes = []
    for agent in agents:
        try:
            codes.append(agent.proc.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            stop(agents)
            pytest.fail(f"a node did not finish in {timeout_s} s: {agent.stderr[-2000:]}")
    return codes


def descendants(pids: list[int]) -> dict[int, str]:
    """Every live process below these, with its command line."""
    found = {}
    for pid in pids:
        try:
            for child in psutil.Process(pid).children(recursive=True):
                found[child.pid] = " ".join(child.cmdline())[:200]
        except psutil.NoSuchProcess:
            pass
    return found


def still_alive(pids: dict[int, str], grace_s: float = 15.0) -> list[str]:
    """The processes among `pids` still running after a grace period to exit or be reaped."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = []
        for pid, cmd in pids.items():
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid}: {cmd}")
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def the_run(store: Path):
    with RunStore(store) as runs:
        (record,) = runs.list_runs()
    return record


def test_two_trainscale_nodes_store_one_run(tmp_path):
    store = tmp_path / "shared.db"  # as on a shared filesystem
    node = [
        *node_cmd(),
        "--nnodes",
        "2",
        "--workers",
        "1",
        "--rdzv-endpoint",
        f"127.0.0.1:{free_port()}",
        "--rdzv-id",
        job_id(),
        "--store",
        str(store),
        "--json",
    ]
    agents = [start_agent(node, tmp_path, f"node{i}") for i in range(2)]
    try:
        codes = wait_all(agents)
    finally:
        stop(agents)
    assert codes == [0, 0], [a.stderr[-2000:] for a in agents]

    record = the_run(store)
    assert record.status == "completed" and record.world_size == 2
    assert record.config["nnodes"] == 2 and record.config["workers"] == 1
    assert sorted(w["rank"] for w in record.summary["workers"]) == [0, 1]
    # --json prints the result where global rank 0 ran; the other node names the same run.
    printed = [json.loads(line) for a in agents for line in a.stdout.splitlines() if line]
    assert [p["run_id"] for p in printed] == [record.run_id]
    other = "".join(a.stderr for a in agents if not a.stdout.strip())
    assert f"run {record.run_id[:8]} completed on 2 nodes" in other


def test_two_torchrun_nodes_store_one_run(tmp_path):
    store = tmp_path / "shared.db"
    endpoint, rdzv_id = f"127.0.0.1:{free_port()}", job_id()

    def torchrun(node_rank: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--node-rank",
            str(node_rank),
            "--nproc-per-node",
            "1",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            endpoint,
            "--rdzv-id",
            rdzv_id,
            *run_cmd(),
            "--store",
            str(store),
            "--json",
        ]

    agents = [start_agent(torchrun(i), tmp_path, f"node{i}") for i in range(2)]
    try:
        codes = wait_all(agents)
    finally:
        stop(agents)
    assert codes == [0, 0], [a.stderr[-2000:] for a in agents]

    record = the_run(store)
    assert record.status == "completed" and record.world_size == 2, "only global rank 0 writes"
    # The node's workers (LOCAL_WORLD_SIZE) plan this node's cores; the world is both nodes.
    assert record.config["workers"] == 1 and record.config["nnodes"] == 2
    assert record.global_batch_size == 16
    assert sorted(w["rank"] for w in record.summary["workers"]) == [0, 1]
    printed = [json.loads(line) for a in agents for line in a.stdout.splitlines() if line]
    assert [p["run_id"] for p in printed] == [record.run_id]


# -- two network namespaces joined by a veth pair -------------------------------------------


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_namespaces():
    """Two network namespaces, 10.77.0.1/24 and 10.77.0.2/24, joined by a veth pair."""
    with veth_namespaces("10.77.0") as nodes:
        yield nodes


@pytest.fixture
def two_namespaces_200():
    """Two network namespaces, 10.200.0.1/24 and 10.200.0.2/24, joined by a veth pair."""
    with veth_namespaces("10.200.0") as nodes:
        yield nodes


@contextlib.contextmanager
def veth_namespaces(subnet: str) -> Iterator[list[tuple[str, str, str]]]:
    """Two network namespaces, SUBNET.1/24 and SUBNET.2/24, joined by a veth pair.

    Yields [(namespace, interface, address)] for each; always removed afterwards.
    """
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("`ip` (iproute2) is not installed")
    tag = uuid.uuid4().hex[:6]
    nodes = [(f"ts-{tag}-{i}", f"tsv{tag}{i}", f"{subnet}.{i + 1}") for i in range(2)]
    created: list[str] = []
    try:
        for namespace, _, _ in nodes:
            added = _ip("netns", "add", namespace)
            if added.returncode != 0:
                pytest.skip(f"`ip netns add` is not allowed here: {added.stderr.strip()}")
            created.append(namespace)
        (ns0, if0, addr0), (ns1, if1, addr1) = nodes
        steps = [
            ("link", "add", if0, "type", "veth", "peer", "name", if1),
            ("link", "set", if0, "netns", ns0),
            ("link", "set", if1, "netns", ns1),
            ("-n", ns0, "addr", "add", f"{addr0}/24", "dev", if0),
            ("-n", ns1, "addr", "add", f"{addr1}/24", "dev", if1),
            ("-n", ns0, "link", "set", if0, "up"),
            ("-n", ns1, "link", "set", if1, "up"),
            ("-n", ns0, "link", "set", "lo", "up"),
            ("-n", ns1, "link", "set", "lo", "up"),
        ]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                pytest.skip(f"cannot build the veth pair (ip {' '.join(step)}): {done.stderr}")
        yield nodes
    finally:
        _ip("link", "del", nodes[0][1])  # only there if setup stopped before the move
        for namespace in created:
            _ip("netns", "del", namespace)  # takes its end of the veth pair with it


def test_two_nodes_in_network_namespaces(tmp_path, two_namespaces):
    endpoint = f"{two_namespaces[0][2]}:29500"  # the first namespace's address hosts it
    rdzv_id = job_id()
    agents = []
    try:
        for index, (namespace, interface, _) in enumerate(two_namespaces):
            node = [
                *node_cmd(),
                "--nnodes",
                "2",
                "--workers",
                "1",
                "--rdzv-endpoint",
                endpoint,
                "--rdzv-id",
                rdzv_id,
                "--rdzv-timeout",
                "120",
                "--store",
                str(tmp_path / f"node{index}.db"),  # one store per "machine"
            ]
            # gloo binds the interface named here; the namespace has no other way out.
            cmd = ["ip", "netns", "exec", namespace, "env", f"GLOO_SOCKET_IFNAME={interface}"]
            agents.append(start_agent([*cmd, *node], tmp_path, f"node{index}"))
        codes = wait_all(agents)
    finally:
        stop(agents)
    assert codes == [0, 0], [a.stderr[-2000:] for a in agents]

    stored = {}
    for index in range(2):
        with RunStore(tmp_path / f"node{index}.db") as runs:
            stored[index] = runs.list_runs()
    assert sorted(len(runs) for runs in stored.values()) == [0, 1], "only global rank 0 writes"
    (record,) = stored[0] or stored[1]
    assert record.status == "completed" and record.world_size == 2
    workers = {w["rank"]: w for w in record.summary["workers"]}
    # Each worker ran in its own namespace and reached the other over the veth pair.
    addresses = {address for _, _, address in two_namespaces}
    assert {w["addr"] for w in workers.values()} == addresses
    holder = 0 if stored[0] else 1  # the node whose store has the run held global rank 0
    assert workers[0]["addr"] == two_namespaces[holder][2]


# A host name that resolves to loopback (Debian's 127.0.1.1) in each node's own UTS and mount
# namespaces: a private host name, and a hosts file bind-mounted over /etc/hosts there only.
ON_LOOPBACK = 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"'


def on_loopback(namespace: str, hostname: str, hosts: Path) -> list[str]:
    """The command prefix that runs a node in NAMESPACE, its host name resolving to 127.0.1.1."""
    hosts.write_text(f"127.0.0.1 localhost\n127.0.1.1 {hostname}\n")
    return ["ip", "netns", "exec", namespace, "unshare", "--uts", "sh", "-c", ON_LOOPBACK]


@pytest.mark.parametrize("launcher", ["trainscale", "torchrun"])
def test_nodes_whose_host_name_resolves_to_loopback_train_over_the_network(
    launcher, tmp_path, monkeypatch, two_namespaces_200
):
    # gloo, left to itself, would advertise 127.0.1.1 to the other node and fail after a
    # timeout; each node finds that before its workers start (trainscale run) or before its
    # process group forms (under torchrun) and names the veth interface.
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    if shutil.which("unshare") is None:
        pytest.skip("`unshare` (util-linux) is not installed")
    probe_cmd = [sys.executable, "-c", "import socket; print(socket.gethostbyname('tsnode'))"]
    (namespace, _, _) = two_namespaces_200[0]
    prefix = on_loopback(namespace, "tsnode", tmp_path / "probe.hosts")
    probe = subprocess.run(
        [*prefix, "sh", "tsnode", str(tmp_path / "probe.hosts"), *probe_cmd],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0 or probe.stdout.strip() != "127.0.1.1":
        pytest.skip(f"cannot give a namespace its own host name and hosts file: {probe.stderr}")

    endpoint = f"{two_namespaces_200[0][2]}:29500"
    rdzv_id = job_id()
    agents = []
    try:
        for index, (namespace, _, address) in enumerate(two_namespaces_200):
            hosts, name = tmp_path / f"node{index}.hosts", f"tsnode{index}"
            # --timeout: a gloo that cannot connect fails within the test, not after 300 s.
            run = [*run_cmd(steps=6), "--no-eval", "--timeout", "30"]
            run += ["--store", str(tmp_path / f"node{index}.db")]
            nodes = ["--nnodes", "2", "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id]
            if launcher == "trainscale":
                node = [sys.executable, *run, *nodes, "--workers", "1", "--rdzv-timeout", "60"]
            else:  # torchrun's agent hosts the store where told, and names a node by address
                torchrun = [sys.executable, "-m", "torch.distributed.run", *nodes]
                torchrun += ["--nproc-per-node", "1", "--rdzv-backend", "c10d"]
                torchrun += ["--local-addr", address, "--rdzv-conf", f"is_host={index == 0}"]
                node = [*torchrun, *run]
            prefix = on_loopback(namespace, name, hosts)
            agents.append(start_agent([*prefix, "sh", name, str(hosts), *node], tmp_path, name))
        codes = wait_all(agents, timeout_s=120)
    finally:
        stop(agents)
    assert codes == [0, 0], [a.stderr[-2000:] for a in agents]

    for agent, (_, interface, _) in zip(agents, two_namespaces_200, strict=True):
        said = [line for line in agent.stderr.splitlines() if "GLOO_SOCKET_IFNAME" in line]
        assert len(said) == 1 and said[0].startswith("trainscale: warning: "), agent.stderr
        assert "127.0.1.1" in said[0] and f"GLOO_SOCKET_IFNAME={interface} " in said[0]
    stored = []
    for index in range(2):
        with RunStore(tmp_path / f"node{index}.db") as runs:
            stored.extend(runs.list_runs())
    (record,) = stored
    assert record.status == "completed" and record.world_size == 2
    addresses = {w["addr"] for w in record.summary["workers"]}
    assert addresses == {address for _, _, address in two_namespaces_200}


# -- faults ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        pytest.param("127.0.0.1", id="peers-never-join"),  # this node hosts; nobody comes
        pytest.param("192.0.2.1", id="endpoint-unreachable"),  # TEST-NET-1: never answers
    ],
)
def test_rendezvous_that_never_forms_fails_in_time_with_one_line(
    host, tmp_path, store_path, capfd, monkeypatch
):
    # gloo's interface chosen by the user: where the host name resolves to loopback, the run
    # would otherwise add its warning line about gloo (tested on its own).
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    endpoint = f"{host}:{free_port()}"
    start = time.monotonic()
    code = run_main(
        "run",
        "mnist-cnn",
        *SYNTH,
        "--steps",
        "4",
        "--nnodes",
        "2",
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        job_id(),
        "--rdzv-timeout",
        "5",
        "--store",
        str(store_path),
    )
    elapsed = time.monotonic() - start
    err = capfd.readouterr().err.strip()
    assert code == 3
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert endpoint in err and "5 s" in err and "--rdzv-timeout" in err
    assert elapsed < 5 + 10, f"took {elapsed:.1f} s for a 5 s rendezvous timeout"
    with RunStore(store_path) as runs:
        assert runs.list_runs() == [], "nothing is stored when no worker started"


def wait_until_listening(port: int, agent: Agent) -> None:
    """Until the agent hosts the rendezvous store on 127.0.0.1:port."""
    deadline = time.monotonic() + AGENT_TIMEOUT_S
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            assert agent.proc.poll() is None, agent.stderr[-2000:]
            assert time.monotonic() < deadline, "the first node never hosted the store"
            time.sleep(0.2)


@pytest.mark.parametrize(
    "victim_hosts_store",
    [
        # The survivor's workers see their peers' connections close (or time out).
        pytest.param(False, id="survivor-hosts-store"),
        # The survivor's agent also loses the rendezvous store and stops its workers.
        pytest.param(True, id="victim-hosts-store"),
    ],
)
def test_a_node_killed_mid_run_fails_the_run_without_hanging(victim_hosts_store, tmp_path):
    store, port = tmp_path / "shared.db", free_port()
    node = [
        *node_cmd(steps=100_000),  # far longer than the test: the kill lands mid-run
        "--nnodes",
        "2",
        "--workers",
        "1",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        job_id(),
        "--timeout",
        "10",
        "--store",
        str(store),
    ]
    agents = [start_agent(node, tmp_path, "first")]
    try:
        wait_until_listening(port, agents[0])  # so the first node is the one hosting it
        agents.append(start_agent(node, tmp_path, "second"))
        victim, survivor = agents if victim_hosts_store else agents[::-1]
        # Global rank 0 creates the row once the nodes have met and its worker has started.
        deadline = time.monotonic() + AGENT_TIMEOUT_S
        while not (store.exists() and RunStore(store).list_runs()):
            assert time.monotonic() < deadline, survivor.stderr[-2000:]
            assert survivor.proc.poll() is None, survivor.stderr[-2000:]
            time.sleep(0.2)
        time.sleep(3)  # into setup and training
        workers = descendants([a.proc.pid for a in agents])
        killed_at = time.monotonic()
        victim.proc.send_signal(signal.SIGKILL)  # the agent only: its workers must follow
        victim.proc.wait()
        try:
            code = survivor.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the surviving node hung: {survivor.stderr[-2000:]}")
        after_kill_s = time.monotonic() - killed_at
    finally:
        stop(agents)

    assert code == 1, survivor.stderr[-2000:]
    assert "failed" in survivor.stderr.strip().splitlines()[-1]
    # The run's one line: the survivor's traceback (where it waited) is kept in its file.
    assert "Traceback" not in survivor.stderr, survivor.stderr[-2000:]
    assert after_kill_s < 10 + 30, "the survivor ends within --timeout plus clean-up"
    # Stored failed whichever node held rank 0: by rank 0 itself, or (the store is shared)
    # by the surviving node when rank 0 was on the node that died.
    record = the_run(store)
    assert record.status == "failed" and record.error, record
    left = still_alive(workers)
    assert not left, f"processes were left behind: {left}"


def run_main(*args: str) -> int:
    """main()'s exit status, whether it returns it or argparse exits with it."""
    try:
        return main(list(args))
    except SystemExit as exit_:  # as Python exits: None is 0, a message is 1
        code = exit_.code
        return code if isinstance(code, int) else 0 if code is None else 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--nnodes", "0"], "--nnodes"),
        (["--nnodes", "two"], "--nnodes"),
        (["--nnodes", "2", "--rdzv-id", "x"], "--rdzv-endpoint"),
        (["--nnodes", "2", "--rdzv-endpoint", "node001:29500"], "--rdzv-id"),
        (["--nnodes", "2", "--rdzv-id", "x", "--rdzv-endpoint", "node001"], "HOST:PORT"),
        (["--nnodes", "2", "--rdzv-id", "x", "--rdzv-endpoint", "node001:0"], "1..65535"),
        (["--nnodes", "2", "--rdzv-id", "x", "--rdzv-endpoint", "node001:70000"], "1..65535"),
        (["--nnodes", "2", "--rdzv-id", "x", "--rdzv-endpoint", ":29500"], "HOST:PORT"),
        (["--nnodes", "2", "--rdzv-id", "x", "--rdzv-endpoint", "a b:29500"], "host name"),
        (["--nnodes", "2", "--rdzv-id", "x", "--rdzv-endpoint", "fd00::1:29500"], "brackets"),
        (
            ["--nnodes", "2", "--rdzv-id", "x", "--rdzv-endpoint", "h:1", "--rdzv-timeout", "0"],
            "--rdzv-timeout",
        ),
        (["--nnodes", "2", "--rdzv-id", "a b", "--rdzv-endpoint", "h:1"], "--rdzv-id"),
    ],
)
def test_bad_multinode_options_are_one_line_and_exit_2(args, fragment, store_path, capsys):
    assert run_main("run", "mnist-cnn", *SYNTH, *args, "--store", str(store_path)) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert fragment in err
    assert not store_path.exists() or not RunStore(store_path).list_runs()


def test_a_node_whose_link_goes_down_is_given_up_on_in_time(tmp_path):
    # The node hosting the rendezvous store stops answering without closing its connections
    # (its whole process group stopped, as when its network link goes down): the survivor's
    # agent must not wait on the store for longer than its bounded store calls allow.
    store, port = tmp_path / "shared.db", free_port()
    endpoint = f"127.0.0.1:{port}"
    node = [
        *node_cmd(steps=100_000),
        *["--nnodes", "2", "--workers", "1", "--rdzv-endpoint", endpoint],
        *["--rdzv-id", job_id(), "--rdzv-timeout", "20", "--store", str(store)],
        *["--timeout", "600"],  # the workers' collectives must not be what ends the run
    ]
    agents = [start_agent(node, tmp_path, "victim")]
    try:
        wait_until_listening(port, agents[0])  # the victim hosts the store
        agents.append(start_agent(node, tmp_path, "survivor"))
        victim, survivor = agents
        deadline = time.monotonic() + AGENT_TIMEOUT_S
        while not (store.exists() and RunStore(store).list_runs()):
            assert time.monotonic() < deadline, survivor.stderr[-2000:]
            assert survivor.proc.poll() is None, survivor.stderr[-2000:]
            time.sleep(0.2)
        time.sleep(2)  # into training
        stopped_at = time.monotonic()
        os.killpg(victim.proc.pid, signal.SIGSTOP)
        try:
            code = survivor.proc.wait(timeout=LINK_DOWN_BOUND_S + 30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the surviving node hung: {survivor.stderr[-2000:]}")
        after_s = time.monotonic() - stopped_at
    finally:
        stop(agents)
    err = survivor.stderr.strip().splitlines()
    assert code != 0, survivor.stderr[-2000:]
    assert endpoint in err[-1] and "stopped answering" in err[-1], survivor.stderr[-2000:]
    assert after_s < LINK_DOWN_BOUND_S, f"gave up after {after_s:.0f} s"


# A process whose main thread waits in torch's C++ store client on a store that accepts the
# connection and never answers (a node whose link went down), with a worker of its own.
STUCK_IN_STORE = """
import datetime, subprocess, sys
from torch.distributed import TCPStore
from trainscale.parallel import stuck_stop
from trainscale.parallel.interrupts import signals_raise
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(worker.pid, flush=True)
with signals_raise():
    assert stuck_stop.install()
    wait = datetime.timedelta(seconds=600)
    TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, timeout=wait)
"""


def test_sigterm_stops_a_node_stuck_in_a_store_call(tmp_path):
    with socket.socket() as silent:  # the kernel accepts connections; nobody ever answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        node = start_agent(
            [sys.executable, "-c", STUCK_IN_STORE, str(silent.getsockname()[1])], tmp_path, "node"
        )
        try:
            deadline = time.monotonic() + 60
            while not node.stdout.strip():
                assert node.proc.poll() is None and time.monotonic() < deadline, node.stderr
                time.sleep(0.1)
            worker = int(node.stdout.split()[0])
            time.sleep(3)  # into the store call
            assert node.proc.poll() is None, node.stderr
            sent_at = time.monotonic()
            node.proc.send_signal(signal.SIGTERM)
            try:
                code = node.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pytest.fail("SIGTERM was ignored while the main thread waited on the store")
            took = time.monotonic() - sent_at
        finally:
            stop([node])
    assert code == 128 + signal.SIGTERM, node.stderr
    assert node.stderr.strip().splitlines()[-1].startswith("trainscale: interrupted (SIGTERM)")
    assert took < 10, f"took {took:.1f} s"
    assert not still_alive({worker: "the node's worker"}, grace_s=5)
