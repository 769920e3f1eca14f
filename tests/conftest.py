"""Fixtures shared by every test folder. Helpers that are not fixtures live in tests/helpers/."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.http_servers import CutShortHandler, QuietHandler, serve


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(base URL, served directory) of an HTTP server on 127.0.0.1 in a thread: the loaders'
    verified downloads are tested against it, never against the network."""
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(QuietHandler, directory=str(served))
    with serve(handler) as base:
        yield base, served


@pytest.fixture
def cut_short_server() -> Iterator[str]:
    """Base URL of a server whose every answer stops half-way through its Content-Length."""
    with serve(CutShortHandler) as base:
        yield base
