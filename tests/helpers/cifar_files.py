"""Small CIFAR-10 batch files in exactly the release formats, for tests.

The python release was written by Python 2's cPickle at protocol 2: str (bytes) as
BINSTRING opcodes, numpy arrays via numpy.core.multiarray._reconstruct. `Py2Pickler` writes
the same opcodes from Python 3, so the loader is tested on what the real files contain.
"""

from __future__ import annotations

import io
import pickle
import struct
from pathlib import Path

import numpy as np

TRAIN_NAMES = tuple(f"data_batch_{i}" for i in range(1, 6))
NAMES = (*TRAIN_NAMES, "test_batch")


class Py2Pickler(pickle._Pickler):
    """Protocol-2 pickles as Python 2 wrote them: bytes and str as BINSTRING, globals under
    the module name of the numpy of the time (`numpy_module` for `_reconstruct`)."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file, numpy_module: str = "numpy.core.multiarray") -> None:
        super().__init__(file, protocol=2)
        self.numpy_module = numpy_module

    def save_bytes(self, obj: bytes) -> None:
        if len(obj) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(obj)]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    def save_str(self, obj: str) -> None:
        self.save_bytes(obj.encode("latin-1"))

    def save_global(self, obj, name=None) -> None:
        module = obj.__module__
        if module in ("numpy._core.multiarray", "numpy.core.multiarray"):
            module = self.numpy_module
        self.write(pickle.GLOBAL + f"{module}\n{name or obj.__qualname__}\n".encode())
        self.memoize(obj)

    dispatch[bytes] = save_bytes
    dispatch[str] = save_str
    dispatch[type] = save_global
    dispatch[type(len)] = save_global


def py2_pickle(obj, numpy_module: str = "numpy.core.multiarray") -> bytes:
    buf = io.BytesIO()
    Py2Pickler(buf, numpy_module).dump(obj)
    return buf.getvalue()


def make_arrays(per_batch: int, seed: int = 0, max_label: int = 9):
    """Six (images (n, 3072) uint8, labels list) pairs; the first pixel of batch i is i."""
    rng = np.random.default_rng(seed)
    batches = []
    for index in range(len(NAMES)):
        images = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        images[0, 0] = index
        labels = [int(v) for v in rng.integers(0, 10, size=per_batch)]
        labels[0] = max_label
        batches.append((images, labels))
    return batches


def batch_dict(images: np.ndarray, labels: list[int], name: str) -> dict:
    return {
        b"batch_label": f"generated {name}".encode(),
        b"labels": labels,
        b"data": images,
        b"filenames": [f"img_{i:05d}.png".encode() for i in range(len(labels))],
    }


def write_python(
    directory: Path,
    per_batch: int = 4,
    *,
    seed: int = 0,
    max_label: int = 9,
    writer: str = "py2",
) -> list:
    """Write the six pickles into `directory`; returns the arrays. `writer` is 'py2' (as the
    release), 'py2-numpy2' (numpy 2 module names) or 'py3' (pickle.dump at protocol 2)."""
    directory.mkdir(parents=True, exist_ok=True)
    batches = make_arrays(per_batch, seed, max_label)
    for name, (images, labels) in zip(NAMES, batches, strict=True):
        entry = batch_dict(images, labels, name)
        if writer == "py3":
            raw = pickle.dumps(entry, protocol=2)
        else:
            module = "numpy._core.multiarray" if writer == "py2-numpy2" else "numpy.core.multiarray"
            raw = py2_pickle(entry, module)
        (directory / name).write_bytes(raw)
    return batches


def write_binary(directory: Path, per_batch: int = 4, *, seed: int = 0, max_label: int = 9):
    """Write the six .bin files (label byte + 3072 CHW pixel bytes per record)."""
    directory.mkdir(parents=True, exist_ok=True)
    batches = make_arrays(per_batch, seed, max_label)
    for name, (images, labels) in zip(NAMES, batches, strict=True):
        records = np.concatenate([np.asarray(labels, np.uint8)[:, None], images], axis=1)
        (directory / f"{name}.bin").write_bytes(records.tobytes())
    return batches
