"""Verified downloads (trainscale.data.cache.download) against transfers cut short: a server
that announces more bytes than it sends must leave nothing behind, checksum or not."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from trainscale.data import cache
from trainscale.data.mnist import MNIST, load_idx_dataset
from trainscale.errors import DataError

from tests.helpers.http_servers import CUT_SHORT_PAYLOAD

FULL = len(CUT_SHORT_PAYLOAD)


@pytest.mark.parametrize(
    "digests",
    [
        {},
        {"sha256": hashlib.sha256(CUT_SHORT_PAYLOAD).hexdigest()},
        {"md5": hashlib.md5(CUT_SHORT_PAYLOAD).hexdigest()},
    ],
    ids=["no-checksum", "sha256", "md5"],
)
def test_cut_short_transfer_is_refused(tmp_path: Path, cut_short_server: str, digests) -> None:
    dest = tmp_path / "out" / "blob"
    url = f"{cut_short_server}blob"
    with pytest.raises(DataError) as info:
        cache.download(url, dest, **digests)
    message = str(info.value)
    assert "\n" not in message
    assert url in message and "cut short" in message
    assert f"received {FULL // 2} of the {FULL} bytes" in message
    assert "checksum" not in message  # the real cause, not its symptom
    assert list((tmp_path / "out").iterdir()) == []  # no blob, no .part


def test_complete_transfer_without_checksum_still_lands(
    tmp_path: Path, server: tuple[str, Path]
) -> None:
    base, served = server
    (served / "blob").write_bytes(CUT_SHORT_PAYLOAD)
    dest = tmp_path / "blob"
    assert cache.download(f"{base}blob", dest) == dest
    assert dest.read_bytes() == CUT_SHORT_PAYLOAD


def test_dataset_download_cut_short_leaves_the_cache_empty(
    tmp_path: Path, cut_short_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    spec = dataclasses.replace(MNIST, mirrors=(cut_short_server,))
    with pytest.raises(DataError) as info:
        load_idx_dataset(spec)
    message = str(info.value)
    assert "download failed" in message and "cut short" in message and "\n" not in message
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []
