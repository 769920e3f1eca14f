"""Multi-node options: endpoint parsing, the job id, the world size, and failure records."""

from __future__ import annotations

import re
import socket
import time

import pytest

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.parallel.rendezvous import (
    Rendezvous,
    RendezvousFailed,
    default_job_id,
    local_address,
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
