"""Reader for the IDX format of MNIST-family datasets (unsigned bytes only).

An IDX file is a 4-byte magic number (two zero bytes, a dtype code, the number of dimensions),
one big-endian uint32 per dimension, then the payload in C order. The MNIST-family files use
dtype 0x08 (unsigned byte) with 3 dimensions for images and 1 for labels, so that is all this
module accepts: anything else in a file named like an MNIST file is a sign of a wrong or
damaged file, and a clear error beats a silently odd array.
"""

from __future__ import annotations

import gzip as _gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np

from trainscale.errors import DataError

GZIP_MAGIC = b"\x1f\x8b"
UBYTE_DTYPE_CODE = 0x08
LABELS_MAGIC = 0x00000801
IMAGES_MAGIC = 0x00000803
SUPPORTED_NDIM = (1, 3)

_FIX = "re-download it or replace it with an intact copy"


def _read_bytes(path: Path) -> bytes:
    """The file's content, decompressed when it starts with the gzip magic."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file; check the data directory") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc}); check permissions") from None
    # Detect compression by content, not by name: torchvision and others keep both
    # "x.gz" and an extracted "x", and renamed files are common.
    if not raw.startswith(GZIP_MAGIC):
        return raw
    try:
        return _gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        # BadGzipFile (an OSError) for bad headers/CRC, EOFError for a cut-off stream,
        # zlib.error for corrupt deflate data.
        raise DataError(f"{path}: corrupt gzip data ({exc}); {_FIX}") from None


def read_idx(path: Path | str, *, expect_ndim: int | None = None) -> np.ndarray:
    """Read an unsigned-byte IDX file (gzipped or not) into a writable uint8 array.

    Args:
        path: the IDX file; gzip compression is detected from its first two bytes.
        expect_ndim: if given, the number of dimensions the file must have
            (3 for images, 1 for labels).

    Returns:
        A C-contiguous uint8 array with the shape stored in the header.

    Raises:
        DataError: the file is missing, unreadable, not IDX, not unsigned-byte, has the
            wrong number of dimensions, is truncated, has trailing bytes, or is corrupt gzip.
    """
    path = Path(path)
    data = _read_bytes(path)
    if len(data) < 4:
        raise DataError(f"{path}: too short to be an IDX file ({len(data)} bytes); {_FIX}")
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != UBYTE_DTYPE_CODE or ndim not in SUPPORTED_NDIM:
        magic = int.from_bytes(data[:4], "big")
        raise DataError(
            f"{path}: bad IDX magic number 0x{magic:08x} (expected 0x{LABELS_MAGIC:08x} for "
            f"labels or 0x{IMAGES_MAGIC:08x} for images); not an MNIST-style IDX file, {_FIX}"
        )
    if expect_ndim is not None and ndim != expect_ndim:
        raise DataError(
            f"{path}: IDX file has {ndim} dimension(s), expected {expect_ndim}; "
            "the image and label files may be swapped"
        )
    header_len = 4 + 4 * ndim
    if len(data) < header_len:
        raise DataError(f"{path}: truncated IDX header ({len(data)} bytes); {_FIX}")
    dims = struct.unpack(f">{ndim}I", data[4:header_len])
    expected = math.prod(dims)
    actual = len(data) - header_len
    if actual < expected:
        raise DataError(
            f"{path}: truncated IDX file: header {dims} needs {expected} data bytes, "
            f"found {actual}; {_FIX}"
        )
    if actual > expected:
        raise DataError(
            f"{path}: IDX file has {actual - expected} extra bytes after the {expected} "
            f"that header {dims} describes; {_FIX}"
        )
    # frombuffer over immutable bytes is read-only; copy once so callers (and torch.from_numpy)
    # get an ordinary writable array.
    return np.frombuffer(data, dtype=np.uint8, offset=header_len).reshape(dims).copy()
