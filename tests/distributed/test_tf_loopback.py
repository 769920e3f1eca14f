"""A single-node TensorFlow run keeps its gRPC servers on the loopback interface, and its
workers reach each other even where the user's environment names an HTTP proxy.

TensorFlow's server listens on every interface whatever TF_CONFIG says
(trainscale.frameworks.tensorflow.loopback); gRPC honours only the lower-case `no_proxy`
(trainscale.frameworks.proxy). One two-worker run serves both tests: its proxy is a closed
port and only the upper-case NO_PROXY lists the loopback, as in a shell set up for curl.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tensorflow")

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 300
"""Ample for two workers on a loaded machine; without the fix the run never ends."""
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


@pytest.fixture(scope="module")
def proxied_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("tf-loopback") / "results.json"
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "no_grpc_proxy")}
    env.update(http_proxy="http://127.0.0.1:9", NO_PROXY="127.0.0.1,localhost")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.distributed.tf_loopback_worker", str(out)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the workers too are stopped if the run hangs
    )
    try:
        _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the two workers did not finish in {RUN_TIMEOUT_S} s (a proxy in the way?)")
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads(out.read_text())


def test_the_workers_grpc_servers_listen_on_loopback_only(proxied_run: dict) -> None:
    assert set(proxied_run) == {"0", "1"}
    for rank, result in proxied_run.items():
        addresses = {port: ip for ip, port in result["listening"]}
        assert result["tf_port"] in addresses, f"rank {rank}: TF's server is not listening"
        exposed = [f"{ip}:{port}" for port, ip in addresses.items() if ip not in LOOPBACK]
        assert not exposed, f"rank {rank} listens beyond loopback: {exposed}"


def test_a_proxy_in_the_environment_does_not_stop_the_workers(proxied_run: dict) -> None:
    for result in proxied_run.values():
        assert result["sum"] == [3.0]  # 1 + 2: the workers reached each other
        assert result["no_proxy"] == "127.0.0.1,localhost"
