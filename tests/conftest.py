"""Shared fixtures: tiny configs and workloads that train in milliseconds on a CPU."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from trainscale.config.options import RunOptions
from trainscale.data.tensors import TensorData
from trainscale.run.resolve import resolve
from trainscale.workloads.base import PYTORCH, Recipe, Workload

REAL_DATA_DIR = os.environ.get("TRAINSCALE_DATA_DIR")


def has_real_mnist() -> bool:
    if not REAL_DATA_DIR:
        return False
    root = Path(REAL_DATA_DIR)
    return any(
        (d / "train-images-idx3-ubyte.gz").exists() or (d / "train-images-idx3-ubyte").exists()
        for d in (root, root / "mnist", root / "MNIST" / "raw")
    )


class TinyNet(torch.nn.Module):
    """A deterministic (dropout-free) conv net, so DDP and serial runs can be compared."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.fc = torch.nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def tiny_data(seed: int = 0, num_train: int = 96, num_test: int = 30) -> TensorData:
    g = torch.Generator().manual_seed(seed)
    return TensorData(
        train_x=torch.randn(num_train, 1, 8, 8, generator=g),
        train_y=torch.randint(0, 3, (num_train,), generator=g),
        test_x=torch.randn(num_test, 1, 8, 8, generator=g),
        test_y=torch.randint(0, 3, (num_test,), generator=g),
        kind="real",  # treated as real so the evaluation path runs; never a real claim
        source="tests: random tensors",
    )


def tiny_workload() -> Workload:
    return Workload(
        name="mnist-cnn",  # borrow a registered name: config resolution looks it up
        description="tiny test net",
        models={PYTORCH: lambda meta: TinyNet()},
        locate_real=lambda request: Path("."),
        load_real=lambda request: tiny_data(),
        make_synthetic=lambda request: tiny_data(request.seed),
        target_accuracy=0.5,
        recipe=Recipe(optimizer="sgd", lr=0.05, batch_size=8, epochs=1.0, schedule="constant"),
    )


def tiny_config(**changes):
    """A resolved config for the tiny workload; changes are RunOptions fields."""
    options = dict(
        workload="mnist-cnn",
        threads_per_worker=1,
        affinity="none",
        global_batch_size=16,
        warmup_steps_untimed=1,
        allow_oversubscribe=True,
    )
    options.update(changes)
    return resolve(RunOptions.from_flat(options)).with_(channels_last=False)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _serve(handler) -> Iterator[str]:
    """Serve `handler` on 127.0.0.1 from a thread; gives the base URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(base URL, served directory) of an HTTP server on 127.0.0.1 in a thread: the loaders'
    verified downloads are tested against it, never against the network."""
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(served))
    with _serve(handler) as base:
        yield base, served


CUT_SHORT_PAYLOAD = bytes(range(256)) * 64
"""What `cut_short_server` means to send: 16 KiB, of which it sends half."""


class _CutShortHandler(http.server.BaseHTTPRequestHandler):
    """Announces all of CUT_SHORT_PAYLOAD in Content-Length, sends half, and hangs up (HTTP/1.0
    closes the connection when the handler returns), like a transfer cut by the network."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(CUT_SHORT_PAYLOAD)))
        self.end_headers()
        self.wfile.write(CUT_SHORT_PAYLOAD[: len(CUT_SHORT_PAYLOAD) // 2])
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def cut_short_server() -> Iterator[str]:
    """Base URL of a server whose every answer stops half-way through its Content-Length."""
    with _serve(_CutShortHandler) as base:
        yield base
