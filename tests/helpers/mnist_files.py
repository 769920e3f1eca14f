"""IDX files as MNIST ships them, and MNIST's four files filled with random digits (real
files, no accuracy meaning)."""

from __future__ import annotations

import gzip as _gzip
import struct
from pathlib import Path

import numpy as np

from trainscale.data.idx import UBYTE_DTYPE_CODE


def write_idx(path: Path | str, array: np.ndarray, gzip: bool) -> None:
    """Write a uint8 array as an IDX file (magic number, big-endian dimensions, C-order
    bytes), gzipped if `gzip`, with a zero timestamp so the same array gives the same bytes."""
    array = np.asarray(array)
    assert array.dtype == np.uint8, array.dtype
    header = struct.pack(f">HBB{array.ndim}I", 0, UBYTE_DTYPE_CODE, array.ndim, *array.shape)
    payload = header + np.ascontiguousarray(array).tobytes()
    Path(path).write_bytes(_gzip.compress(payload, mtime=0) if gzip else payload)


def write_random_mnist(folder: Path, num_train: int, num_test: int) -> Path:
    """The four MNIST IDX files (uncompressed) in `folder`, random images and labels."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", num_train), ("t10k", num_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        write_idx(folder / f"{name}-images-idx3-ubyte", images, gzip=False)
        write_idx(
            folder / f"{name}-labels-idx1-ubyte", rng.integers(0, 10, n, np.uint8), gzip=False
        )
    return folder
