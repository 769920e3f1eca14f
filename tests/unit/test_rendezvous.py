"""Multi-node options: endpoint parsing, the job id, the world size, failure records, and
the network interface gloo is given."""

from __future__ import annotations

import os
import re
import socket
import time

import pytest

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.parallel import rendezvous as rdzv
from trainscale.parallel.rendezvous import (
    GlooInterface,
    Rendezvous,
    RendezvousFailed,
    _can_bind,
    default_job_id,
    gloo_for_workers,
    gloo_interface,
    local_address,
    master_endpoint,
    parse_endpoint,
    store_role,
    wait_for_endpoint,
)
from trainscale.results.store import RunStore
from trainscale.runner.launch import _record_failure
from trainscale.runner.record import create_run_row
from trainscale.runner.resolve import resolve

from tests.helpers.tiny import tiny_config


@pytest.fixture(autouse=True)
def no_launcher_or_slurm(monkeypatch):
    for name in ("SLURM_JOB_ID", "SLURM_STEP_ID", "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("node001:29500", ("node001", 29500)),
        ("10.0.0.1:1", ("10.0.0.1", 1)),
        (" node-1.cluster.local:65535 ", ("node-1.cluster.local", 65535)),
        ("[fd00::1]:29500", ("fd00::1", 29500)),
    ],
)
def test_endpoints_parse(text, expected):
    assert parse_endpoint(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "node001", "node001:", ":29500", "node001:0", "h:65536", "h:x", "fd00::1:5", "a/b:1"],
)
def test_bad_endpoints_are_config_errors(text):
    with pytest.raises(ConfigError, match="--rdzv-endpoint"):
        parse_endpoint(text)


def test_slurm_gives_every_node_of_a_step_the_same_job_id():
    assert default_job_id({}) is None
    assert default_job_id({"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "3"}) == "slurm-42-3"
    assert default_job_id({"SLURM_JOB_ID": "42"}) == "slurm-42-batch"


def options(**changes) -> RunOptions:
    fields = dict(
        workload="mnist-cnn",
        data="synthetic",
        threads_per_worker=1,
        affinity="none",
        allow_oversubscribe=True,
        nnodes=2,
        rdzv_endpoint="node001:29500",
        rdzv_id="job7",
    )
    fields.update(changes)
    return RunOptions.from_flat(fields)


def test_world_size_and_global_batch_span_the_nodes():
    config = resolve(options(workers=2, global_batch_size=64))
    assert (
        config.world_size == 4
        and config.optimisation.batch_size == 16
        and config.optimisation.global_batch_size == 64
    )
    assert config.parallel.workers == 2, "--workers stays per node"
    config = resolve(options(workers=1, batch_size=8))
    assert config.optimisation.global_batch_size == 16
    with pytest.raises(ConfigError, match="--nnodes 2"):
        resolve(options(workers=2, global_batch_size=30))


def test_job_id_defaults_under_slurm_and_is_required_elsewhere(monkeypatch):
    with pytest.raises(ConfigError, match="--rdzv-id"):
        resolve(options(rdzv_id=None))
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    assert resolve(options(rdzv_id=None)).nodes.rdzv_id == "slurm-42-0"


def test_an_external_launcher_needs_no_endpoint(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    config = resolve(options(rdzv_endpoint=None, rdzv_id=None))
    assert config.nodes.nnodes == 2 and config.nodes.rdzv_endpoint is None


def test_one_node_ignores_rendezvous_options_and_keeps_its_hash():
    plain = resolve(options(nnodes=1, rdzv_endpoint=None, rdzv_id=None))
    with_rdzv = resolve(options(nnodes=1))
    assert (
        with_rdzv.nodes.rdzv_endpoint is None and with_rdzv.settings_hash() == plain.settings_hash()
    )
    two = resolve(options())
    assert two.settings_hash() != plain.settings_hash(), "the node count shapes the run"
    moved = resolve(options(rdzv_endpoint="node002:29400", rdzv_id="job8", rdzv_timeout_s=9))
    assert moved.settings_hash() == two.settings_hash(), "where nodes met is not a setting"


def test_loopback_is_hosted_here_and_other_addresses_are_not():
    assert store_role(Rendezvous("127.0.0.1:29500", "j", 2, 5.0)) == (True, None)
    assert store_role(Rendezvous("192.0.2.1:29500", "j", 2, 5.0)) == (False, None)


def test_a_failure_is_recorded_only_where_the_run_row_is(store_path):
    config = tiny_config(workers=1)
    with RunStore(store_path) as store:
        create_run_row(store, "a" * 32, config)
    assert _record_failure(store_path, "a" * 32, "node 1 died").run_id == "a" * 32
    assert _record_failure(store_path, "b" * 32, "elsewhere").reason == "elsewhere"
    assert str(_record_failure(store_path, None, "early")) == "run failed: early"
    with RunStore(store_path) as store:
        (record,) = store.list_runs()  # no row made up for the run stored on another node
    assert record.status == "failed" and record.error == "node 1 died"


def test_waiting_for_an_endpoint_is_bounded_and_names_it():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        listening = Rendezvous(f"127.0.0.1:{server.getsockname()[1]}", "j", 2, 5.0)
        wait_for_endpoint(listening, time.monotonic() + 5)  # answers: returns at once
        assert local_address(listening) == "127.0.0.1"
    start = time.monotonic()
    with pytest.raises(RendezvousFailed, match=re.escape(listening.endpoint)):
        wait_for_endpoint(listening, time.monotonic() + 1)  # closed now: refused
    assert time.monotonic() - start < 3


# -- the interface gloo listens on: a fake resolver, routes and interfaces ----------------

HOSTS = {
    "localhost": ["127.0.0.1", "::1"],
    "node001": ["10.0.0.1"],
    "debian": ["127.0.1.1"],  # the host name as Debian's installer writes /etc/hosts
    "v6only": ["::1"],
    "good": ["10.0.0.2"],
    "elsewhere": ["10.9.9.9"],  # resolves to an address of no interface here
    "mixed": ["10.9.9.9", "127.0.1.1", "10.0.0.2"],
}
HERE = {"lo": ["127.0.0.1", "::1"], "eth0": ["192.168.1.5"], "ib0": ["10.0.0.2", "fd00::2"]}


def choose(endpoint, hostname, environ=None, route="10.0.0.2", interfaces=HERE):
    def resolve(host):
        if host in HOSTS:
            return HOSTS[host]
        return [host] if host[0].isdigit() or ":" in host else []

    return gloo_interface(
        endpoint,
        {} if environ is None else environ,
        hostname=lambda: hostname,
        resolve=resolve,
        can_bind=lambda address: (
            any(address in a for a in interfaces.values()) or address.startswith("127.")
        ),  # all of 127/8 is on the loopback interface
        route_source=lambda host, port: route,
        interfaces=lambda: interfaces,
    )


def test_a_host_name_on_loopback_gives_gloo_the_interface_that_reaches_the_endpoint():
    choice = choose("node001:29500", "debian")
    assert choice.name == "ib0"
    assert "\n" not in choice.note
    assert "127.0.1.1" in choice.note and "'debian'" in choice.note
    assert "GLOO_SOCKET_IFNAME=ib0" in choice.note and "10.0.0.2" in choice.note


@pytest.mark.parametrize(
    "hostname",
    [
        pytest.param("debian", id="resolves-to-127.0.1.1"),
        pytest.param("v6only", id="resolves-to-::1"),
        pytest.param("elsewhere", id="no-bindable-address-gloo-falls-back-to-127.0.0.1"),
        pytest.param("unknown", id="does-not-resolve-gloo-falls-back-to-127.0.0.1"),
        pytest.param("mixed", id="first-bindable-address-is-loopback"),
    ],
)
def test_every_way_gloo_ends_up_on_loopback_is_found(hostname):
    assert choose("node001:29500", hostname).name == "ib0"


def test_a_host_name_on_the_network_leaves_gloo_alone():
    assert choose("node001:29500", "good") == GlooInterface()


@pytest.mark.parametrize("endpoint", ["127.0.0.1:29500", "localhost:29500", "[::1]:29500"])
def test_an_endpoint_on_loopback_leaves_gloo_alone(endpoint):
    # Every node is on this machine: loopback is the right network.
    assert choose(endpoint, "debian") == GlooInterface()


def test_the_users_interface_always_wins():
    def never(*_):
        raise AssertionError("nothing is looked up when the user chose")

    choice = gloo_interface(
        "node001:29500",
        {"GLOO_SOCKET_IFNAME": "eth0"},
        hostname=never,
        resolve=never,
        can_bind=never,
        route_source=never,
        interfaces=never,
    )
    assert choice == GlooInterface()
    assert choose("node001:29500", "debian", environ={"GLOO_SOCKET_IFNAME": " "}).name == "ib0"


def test_an_ipv6_route_picks_the_interface_holding_that_address():
    assert choose("[fd00::1]:29500", "debian", route="fd00::2").name == "ib0"


@pytest.mark.parametrize(
    ("route", "interfaces"),
    [
        pytest.param(None, HERE, id="no-route-to-the-endpoint"),
        pytest.param("10.0.0.7", HERE, id="route-source-on-no-interface"),
    ],
)
def test_without_an_interface_to_pick_one_line_names_the_variable(route, interfaces):
    choice = choose("node001:29500", "debian", route=route, interfaces=interfaces)
    assert choice.name is None
    assert "\n" not in choice.note
    assert "127.0.1.1" in choice.note and "GLOO_SOCKET_IFNAME=<interface>" in choice.note


def test_binding_is_checked_on_this_machine():
    assert _can_bind("127.0.0.1")
    assert not _can_bind("192.0.2.1")  # TEST-NET-1: no interface here holds it


def test_workers_get_the_interface_while_they_start_and_the_environment_is_restored(
    monkeypatch, caplog
):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    picked = GlooInterface("ib0", "gloo would listen on 127.0.1.1 ...")
    monkeypatch.setattr(rdzv, "gloo_interface", lambda endpoint, environ: picked)
    with caplog.at_level("WARNING", logger="trainscale"), gloo_for_workers("n:1") as choice:
        assert choice == picked and os.environ["GLOO_SOCKET_IFNAME"] == "ib0"
    assert "GLOO_SOCKET_IFNAME" not in os.environ
    assert [r.getMessage() for r in caplog.records] == [picked.note]
    caplog.clear()
    with gloo_for_workers("n:1", say=False):  # another worker of this node: set, not said
        assert os.environ["GLOO_SOCKET_IFNAME"] == "ib0"
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", " ")  # blank: not a choice, but put back after
    with gloo_for_workers("n:1", say=False):
        assert os.environ["GLOO_SOCKET_IFNAME"] == "ib0"
    assert os.environ.pop("GLOO_SOCKET_IFNAME") == " "
    for endpoint, uses_gloo in [("n:1", False), (None, True)]:  # NCCL; no endpoint known
        with gloo_for_workers(endpoint, uses_gloo) as choice:
            assert choice == GlooInterface() and "GLOO_SOCKET_IFNAME" not in os.environ
    assert not caplog.records


def test_an_external_launchers_master_is_the_endpoint_its_workers_check():
    assert master_endpoint({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}) == "10.0.0.1:29500"
    assert master_endpoint({"MASTER_ADDR": "fd00::1", "MASTER_PORT": "1"}) == "[fd00::1]:1"
    assert master_endpoint({"MASTER_ADDR": "node001"}) is None
    assert master_endpoint({}) is None


def test_a_node_that_joined_a_job_formed_without_it_is_one_line_exit_3(monkeypatch):
    # torch's agent keeps such a node as a spare until the job ends, then returns no
    # result, on which its launcher fails with AttributeError ('NoneType' ... 'is_failed').
    from trainscale.parallel import launcher
    from trainscale.parallel import rendezvous as rdzv

    def no_result(config, entrypoint):
        def run(*args):
            raise AttributeError("'NoneType' object has no attribute 'is_failed'")

        return run

    settings = {"min_nodes": 2, "max_nodes": 2, "run_id": "job", "rdzv_endpoint": "h:29500"}
    monkeypatch.setattr(rdzv, "launch_settings", lambda rendezvous: settings)
    monkeypatch.setattr(launcher, "elastic_launch", no_result)
    job = rdzv.Rendezvous(endpoint="h:29500", job_id="job", nnodes=2, timeout_s=10)
    with pytest.raises(rdzv.RendezvousFailed, match="formed with its 2 nodes without this one"):
        launcher.launch_workers(print, (), 1, rendezvous=job)
    assert rdzv.RendezvousFailed.exit_code == 3


def test_a_closed_rendezvous_names_both_ways_it_closes():
    from torch.distributed.elastic.rendezvous.api import RendezvousClosedError

    job = rdzv.Rendezvous(endpoint="h:29500", job_id="job", nnodes=3, timeout_s=10)
    line = rdzv.describe_failure(job, RendezvousClosedError())
    assert "a job with this id ended there" in line
    assert "gave up before 3 nodes joined" in line and "\n" not in line
