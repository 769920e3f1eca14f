"""A cache of encoded text datasets, keyed by the input files and the options.

Tokenizing IMDB (50k reviews, about 12M tokens) takes far longer than reading the encoded
matrices back, and every worker of a run needs the same result. The parent process encodes
once while it checks the data (`locate_real`); the workers then find the result here. The
key holds every input file's path, size and modification time (to the nanosecond), as make
and rsync tell a changed file: an edited file is never served stale, and checking the 50,000
files of an aclImdb tree costs a fraction of a second where hashing their bytes took seconds.
Caching is best-effort: an unwritable cache or an unreadable entry only costs re-encoding.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from trainscale.data import cache
from trainscale.data.text import EncodedSplits
from trainscale.errors import DataError

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
"""Bump when tokenization or encoding changes, so old entries are never reused."""


def cache_key(files: Iterable[Path], options: dict[str, object]) -> str:
    """SHA-256 over the encoding version, the options and every file's resolved path, size
    and modification time (the path too, so that the `source` stored with the entry is where
    the data really is). DataError (one line) for a file that cannot be read."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"v": FORMAT_VERSION, **options}, sort_keys=True).encode())
    # Plain strings and os calls, each folder resolved once: pathlib's per-file overhead
    # was most of the time for the 50,000 files of an aclImdb tree.
    folders: dict[str, str] = {}
    for path in files:
        parent, name = os.path.split(os.fspath(path))
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise DataError(f"{path} does not exist") from None
        except OSError as exc:
            raise DataError(f"cannot read {path} ({exc.strerror or exc})") from None
        if stat.S_ISDIR(info.st_mode):
            raise DataError(f"{path} is a directory, expected a file")
        folder = folders.get(parent)
        if folder is None:
            folder = folders[parent] = os.path.realpath(parent or ".")
        digest.update(f"{folder}/{name}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def _entry(key: str) -> Path:
    return cache.cache_dir() / "encoded-text" / f"{key}.npz"


def load(key: str) -> EncodedSplits | None:
    """The cached splits for `key`, or None (absent or unreadable)."""
    path = _entry(key)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            return EncodedSplits(
                train_ids=f["train_ids"].astype(np.int64),
                train_labels=f["train_labels"],
                test_ids=f["test_ids"].astype(np.int64),
                test_labels=f["test_labels"],
                vocab_size=int(f["vocab_size"]),
                classes=[str(c) for c in f["classes"]],
                source=str(f["source"]),
                max_len=int(f["max_len"]),
            )
    except Exception as exc:  # a damaged entry is rebuilt, never fatal
        log.info("ignoring unreadable cache entry %s (%s)", path, exc)
        return None


def store(key: str, splits: EncodedSplits) -> None:
    """Write `splits` under `key` atomically (temporary file, then rename); best-effort."""
    path = _entry(key)
    # int32 halves the file; ids are < vocab_size, far below 2**31.
    arrays = {
        "train_ids": splits.train_ids.astype(np.int32),
        "train_labels": splits.train_labels,
        "test_ids": splits.test_ids.astype(np.int32),
        "test_labels": splits.test_labels,
        "vocab_size": np.int64(splits.vocab_size),
        "classes": np.array(splits.classes, dtype=np.str_),
        "source": np.array(splits.source, dtype=np.str_),
        "max_len": np.int64(splits.max_len),
    }
    tmp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".part")
        with os.fdopen(fd, "wb") as out:
            np.savez(out, **arrays)
        os.replace(tmp_name, path)
    except OSError as exc:
        log.info("not caching encoded text at %s (%s)", path, exc)
        if tmp_name is not None:
            Path(tmp_name).unlink(missing_ok=True)


def cached(
    files: Iterable[Path], options: dict[str, object], build: Callable[[], EncodedSplits]
) -> EncodedSplits:
    """`build()`'s result, from the cache when the same files and options were seen before."""
    key = cache_key(files, options)
    hit = load(key)
    if hit is not None:
        return hit
    splits = build()
    store(key, splits)
    return splits
