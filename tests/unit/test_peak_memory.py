"""A worker's peak memory in bytes on every platform: getrusage's peak is in kilobytes on
Linux and in bytes on macOS (hardware/resources.py)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import psutil
import pytest

from trainscale.hardware import resources
from trainscale.hardware.resources import peak_rss_bytes


def test_the_peak_is_at_least_what_the_process_holds_now_and_of_its_order() -> None:
    now = psutil.Process().memory_info().rss
    peak = peak_rss_bytes()
    # The kernel's two counts differ by a page or so; kilobytes read as bytes would be
    # 1,024 times short, bytes read as kilobytes 1,024 times long.
    assert now / 2 < peak < 100 * now


@pytest.mark.parametrize(("platform", "factor"), [("linux", 1024), ("darwin", 1)])
def test_the_unit_of_getrusage_is_the_platforms(
    monkeypatch: pytest.MonkeyPatch, platform: str, factor: int
) -> None:
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(
        resources.resource, "getrusage", lambda who: SimpleNamespace(ru_maxrss=300_000)
    )
    assert peak_rss_bytes() == 300_000 * factor
