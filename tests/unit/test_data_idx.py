"""The IDX reader on tiny generated files, gzipped and plain (written by the tests' writer,
whose header bytes are checked by hand)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from trainscale.data.idx import read_idx
from trainscale.errors import DataError

from tests.helpers.mnist_files import write_idx


def _images(n: int = 5) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)


@pytest.mark.parametrize("use_gzip", [False, True])
@pytest.mark.parametrize(
    "array",
    [_images(), np.arange(7, dtype=np.uint8), np.zeros((0, 28, 28), dtype=np.uint8)],
    ids=["images", "labels", "empty"],
)
def test_roundtrip(tmp_path: Path, array: np.ndarray, use_gzip: bool) -> None:
    path = tmp_path / "f-idx"
    write_idx(path, array, gzip=use_gzip)
    assert path.read_bytes()[:2] == (b"\x1f\x8b" if use_gzip else b"\0\0")
    back = read_idx(path)
    assert back.dtype == np.uint8
    assert back.flags.writeable
    np.testing.assert_array_equal(back, array)


def test_exact_header_bytes(tmp_path: Path) -> None:
    path = tmp_path / "labels"
    write_idx(path, np.array([3, 1, 4], dtype=np.uint8), gzip=False)
    assert path.read_bytes() == b"\x00\x00\x08\x01" + struct.pack(">I", 3) + b"\x03\x01\x04"


def test_gzip_detected_by_content_not_name(tmp_path: Path) -> None:
    gz_named_plain = tmp_path / "plain.gz"
    plain_named_gz = tmp_path / "compressed"
    write_idx(gz_named_plain, _images(2), gzip=False)
    write_idx(plain_named_gz, _images(2), gzip=True)
    np.testing.assert_array_equal(read_idx(gz_named_plain), read_idx(plain_named_gz))


def _assert_data_error(path: Path, *fragments: str, **kwargs: int) -> None:
    with pytest.raises(DataError) as info:
        read_idx(path, **kwargs)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize("use_gzip", [False, True])
def test_bad_magic(tmp_path: Path, use_gzip: bool) -> None:
    path = tmp_path / "bad"
    data = b"\x00\x00\x0d\x03" + struct.pack(">3I", 1, 2, 2) + bytes(16)  # float dtype code
    path.write_bytes(gzip.compress(data) if use_gzip else data)
    _assert_data_error(path, "magic", "0x00000d03")


def test_bad_magic_nonzero_prefix(tmp_path: Path) -> None:
    path = tmp_path / "png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    _assert_data_error(path, "magic")


def test_unsupported_ndim(tmp_path: Path) -> None:
    path = tmp_path / "two-d"
    path.write_bytes(b"\x00\x00\x08\x02" + struct.pack(">2I", 2, 2) + bytes(4))
    _assert_data_error(path, "magic")


def test_expect_ndim(tmp_path: Path) -> None:
    path = tmp_path / "labels"
    write_idx(path, np.arange(3, dtype=np.uint8), gzip=False)
    _assert_data_error(path, "expected 3", expect_ndim=3)


@pytest.mark.parametrize("use_gzip", [False, True])
def test_truncated_payload(tmp_path: Path, use_gzip: bool) -> None:
    plain = tmp_path / "plain"
    write_idx(plain, _images(3), gzip=False)
    path = tmp_path / "cut"
    data = plain.read_bytes()[:-10]
    path.write_bytes(gzip.compress(data) if use_gzip else data)
    _assert_data_error(path, "truncated", "found 2342")


@pytest.mark.parametrize("length", [0, 3, 10])
def test_truncated_header(tmp_path: Path, length: int) -> None:
    plain = tmp_path / "plain"
    write_idx(plain, _images(1), gzip=False)
    path = tmp_path / "cut"
    path.write_bytes(plain.read_bytes()[:length])
    _assert_data_error(path)


@pytest.mark.parametrize("use_gzip", [False, True])
def test_extra_bytes(tmp_path: Path, use_gzip: bool) -> None:
    plain = tmp_path / "plain"
    write_idx(plain, np.arange(4, dtype=np.uint8), gzip=False)
    path = tmp_path / "long"
    data = plain.read_bytes() + b"\x00\x00"
    path.write_bytes(gzip.compress(data) if use_gzip else data)
    _assert_data_error(path, "2 extra bytes")


def test_corrupt_gzip_stream(tmp_path: Path) -> None:
    path = tmp_path / "f.gz"
    write_idx(path, _images(), gzip=True)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # flip bits in the deflate stream
    path.write_bytes(bytes(data))
    _assert_data_error(path, "gzip")


def test_cut_off_gzip(tmp_path: Path) -> None:
    path = tmp_path / "f.gz"
    write_idx(path, _images(), gzip=True)
    path.write_bytes(path.read_bytes()[:-20])
    _assert_data_error(path, "gzip")


def test_gzip_crc_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "f.gz"
    write_idx(path, _images(), gzip=True)
    data = bytearray(path.read_bytes())
    data[-8] ^= 0xFF  # the CRC32 in the trailer
    path.write_bytes(bytes(data))
    _assert_data_error(path, "gzip")


def test_missing_file(tmp_path: Path) -> None:
    _assert_data_error(tmp_path / "absent", "no such file")
