"""Fixtures of the Python API's tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No real cache, data, store or home directory leaks into these tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    monkeypatch.chdir(tmp_path)
