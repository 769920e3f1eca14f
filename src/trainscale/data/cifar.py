"""CIFAR-10: find the python or binary batch files, or download the python release; load them.

The python release (`cifar-10-batches-py`) holds six pickles (`data_batch_1`..`5`,
`test_batch`), each a Python 2 dict with b'data' (uint8, N x 3072, CHW order), b'labels' (a
list of N ints), b'batch_label' and b'filenames'. The binary release (`cifar-10-batches-bin`)
holds `data_batch_1.bin`..`5.bin` and `test_batch.bin`, each N records of one label byte and
3072 pixel bytes. The canonical files hold 10000 images each.

Pickles can run code when loaded, so they are read with an unpickler that builds only numpy
arrays (and their dtypes) and refuses everything else before it is called.

numpy only (no torch), so importing this is cheap; tensors are the workload's business.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import pickle
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from trainscale.data import cache, search
from trainscale.errors import DataError

DATA_ENV = search.DATA_ENV
NAME = "cifar10"
"""Our name for the dataset, also its sub-directory in the cache."""
PY_FOLDER = "cifar-10-batches-py"
BIN_FOLDER = "cifar-10-batches-bin"
BATCHES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch")
"""The six batch files of the python release; the binary ones add '.bin'."""
NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
PIXELS = 3 * 32 * 32
RECORD_BYTES = 1 + PIXELS
CANONICAL_BATCH_SIZE = 10_000
"""Images per batch file in the release (50000 training, 10000 test)."""

ARCHIVE_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
# The SHA-256 Keras pins for this URL (keras/src/datasets/cifar10.py, get_file(file_hash=...)).
# The CIFAR page itself and torchvision (CIFAR10.tgz_md5) publish only its MD5,
# c58f30108f718f92721af3b95e74349a; independent dataset manifests list the two digests for
# the same 170,498,071-byte file. It could not be recomputed here (no network, no copy).
ARCHIVE_SHA256 = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
ARCHIVE_NAME = "cifar-10-python.tar.gz"

FORMATS = {"python": BATCHES, "binary": tuple(f"{name}.bin" for name in BATCHES)}
"""The six file names of each format, training batches first."""


@dataclass(frozen=True)
class RawCifar:
    """CIFAR-10 as loaded from disk: uint8 images, not yet normalised."""

    train_images: np.ndarray
    """(N, 3, 32, 32) uint8."""
    train_labels: np.ndarray
    """(N,) int64 in [0, 10)."""
    test_images: np.ndarray
    """(M, 3, 32, 32) uint8."""
    test_labels: np.ndarray
    """(M,) int64 in [0, 10)."""
    source: str
    """The directory the files were read from."""
    format: str
    """'python' or 'binary'."""


# --- restricted unpickling -------------------------------------------------------------------

# The function numpy's arrays pickle with: numpy 1 names it numpy.core.multiarray._reconstruct,
# numpy 2 numpy._core.multiarray._reconstruct. Taken from numpy itself so that neither
# (deprecated) module path has to be imported.
_RECONSTRUCT = np.empty(0).__reduce__()[0]

_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    # Python 3 writes bytes as _codecs.encode(str, 'latin1') at protocols 0-2, so copies
    # re-saved from Python 3 at the release's protocol need it; it only makes bytes.
    ("_codecs", "encode"): codecs.encode,
}

_REQUIRED_KEYS = frozenset({"data", "labels"})
_KNOWN_KEYS = frozenset({"data", "labels", "batch_label", "filenames"})
_FIX = "re-download it or replace it with an intact copy"


class _BatchUnpickler(pickle.Unpickler):
    """Builds numpy arrays and plain containers; any other global is refused, never called."""

    def __init__(self, file: Any, path: Path) -> None:
        # encoding='bytes' keeps Python 2 str as bytes: the keys stay b'data' etc. and the
        # pixel buffer is not decoded as text.
        super().__init__(file, encoding="bytes")
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise DataError(
                f"{self._path}: refusing to unpickle {module}.{name}: a CIFAR-10 batch holds "
                "only numpy arrays, lists and strings; the file is not a CIFAR-10 batch (or was "
                "tampered with)"
            ) from None


def _unpickle(path: Path) -> Any:
    try:
        with path.open("rb") as f:
            return _BatchUnpickler(f, path).load()
    except DataError:
        raise
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc}); check permissions") from None
    except Exception as exc:
        # A damaged or foreign file can fail in many ways inside pickle or numpy
        # (UnpicklingError, EOFError, ValueError, TypeError, MemoryError, ...): all mean the
        # same thing to the user.
        reason = " ".join(str(exc).split())  # one line, whatever the exception says
        raise DataError(
            f"{path}: not a readable CIFAR-10 python batch ({type(exc).__name__}: {reason}); {_FIX}"
        ) from None


def _text_key(key: Any) -> str | None:
    if isinstance(key, bytes):
        return key.decode("latin-1")
    return key if isinstance(key, str) else None


def read_python_batch(path: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """Read one pickled batch: ((N, 3, 32, 32) uint8 images, (N,) int64 labels).

    Raises:
        DataError: the file holds anything but the expected dict of array and labels
            (other objects are refused before they are built), or its shapes, counts or
            labels are wrong; the message names the file.
    """
    path = Path(path)
    batch = _unpickle(path)
    if not isinstance(batch, dict):
        raise DataError(
            f"{path}: holds a {type(batch).__name__}, expected a dict with data and labels; "
            "not a CIFAR-10 python batch"
        )
    entries = {_text_key(key): value for key, value in batch.items()}
    keys = set(entries)
    if None in keys or not keys <= _KNOWN_KEYS or not keys >= _REQUIRED_KEYS:
        found = sorted(str(k) for k in keys)
        raise DataError(
            f"{path}: keys {found}, expected data and labels (with batch_label, filenames); "
            "not a CIFAR-10 python batch (CIFAR-100 files have fine_labels instead)"
        )
    images = entries["data"]
    if not (
        isinstance(images, np.ndarray)
        and images.dtype == np.uint8
        and images.ndim == 2
        and images.shape[1] == PIXELS
    ):
        what = (
            f"a {images.dtype} array of shape {images.shape}"
            if isinstance(images, np.ndarray)
            else f"a {type(images).__name__}"
        )
        raise DataError(f"{path}: data is {what}, expected uint8 of shape (N, {PIXELS}); {_FIX}")
    labels = _labels_array(entries["labels"], path)
    if len(labels) != len(images):
        raise DataError(
            f"{path}: {len(images)} images but {len(labels)} labels; the file is damaged, {_FIX}"
        )
    _check_batch(images, labels, path)
    return images.reshape(-1, *IMAGE_SHAPE), labels


def _labels_array(labels: Any, path: Path) -> np.ndarray:
    if not isinstance(labels, (list, np.ndarray)):
        raise DataError(f"{path}: labels is a {type(labels).__name__}, expected a list of ints")
    try:
        array = np.asarray(labels)
    except (ValueError, TypeError):  # ragged nested lists
        array = np.asarray(labels, dtype=object)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise DataError(
            f"{path}: labels must be a flat list of ints, got {array.dtype} {array.shape}"
        )
    return array.astype(np.int64)


def _check_batch(images: np.ndarray, labels: np.ndarray, path: Path) -> None:
    if len(images) == 0:
        raise DataError(f"{path}: holds no images; {_FIX}")
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= NUM_CLASSES:
        bad = high if high >= NUM_CLASSES else low
        raise DataError(
            f"{path}: label {bad} is out of range for CIFAR-10 (0..{NUM_CLASSES - 1}); "
            "wrong dataset or damaged file"
        )


def read_binary_batch(path: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """Read one binary batch: ((N, 3, 32, 32) uint8 images, (N,) int64 labels).

    Raises:
        DataError: the size is not a whole, positive number of 3073-byte records (a
            truncated file, or another dataset), or a label is out of range.
    """
    path = Path(path)
    try:
        raw = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc}); check permissions") from None
    if raw.size == 0 or raw.size % RECORD_BYTES:
        raise DataError(
            f"{path}: {raw.size} bytes is not a whole number of {RECORD_BYTES}-byte records "
            f"(1 label byte + {PIXELS} pixels); truncated or not a CIFAR-10 binary batch, {_FIX}"
        )
    records = raw.reshape(-1, RECORD_BYTES)
    images = np.ascontiguousarray(records[:, 1:]).reshape(-1, *IMAGE_SHAPE)
    labels = records[:, 0].astype(np.int64)
    _check_batch(images, labels, path)
    return images, labels


# --- search ------------------------------------------------------------------------------

PLACES = search.DatasetPlaces(
    name=NAME,
    missing=f"{NAME} not found",
    expected=(
        f"{PY_FOLDER}/ (data_batch_1..5, test_batch) or {BIN_FOLDER}/ (data_batch_1.bin.."
        "5.bin, test_batch.bin)"
    ),
    brief=f"{PY_FOLDER}/ or -bin/",
    folders=(PY_FOLDER, BIN_FOLDER),
    # Keras 3 extracts its download one folder deeper, under cifar-10-batches-py-target/.
    other_tools=(
        search.CWD_DATA,
        search.HOME_DATA,
        search.TORCHVISION,
        search.KERAS,
        f"{search.KERAS}/{PY_FOLDER}-target",
    ),
)
"""Where CIFAR-10 is looked for (``trainscale.data.search`` has the order): each place as
is and with the release folders; other tools' caches are ``./data``, ``~/data``,
``~/.cache/torchvision`` and Keras's ``~/.keras/datasets`` (and Keras 3's folder in it)."""


def candidate_dirs(data_dir: Path | str | None = None) -> list[Path]:
    """Every directory looked in, in order, without duplicates: each root as is, then with
    the release folders ``cifar-10-batches-py`` and ``cifar-10-batches-bin``."""
    return search.candidate_dirs(PLACES, data_dir)


def _probe(directory: Path) -> tuple[tuple[Path, str] | None, str]:
    """((``directory``, its complete format), or None; a note on partial sets)."""
    notes = []
    for fmt, names in FORMATS.items():  # python first: it is what downloads produce
        missing = [name for name in names if not (directory / name).is_file()]
        if not missing:
            return (directory, fmt), ""
        if len(missing) < len(names):
            # A partial set is worth naming: it is usually an interrupted copy or a typo.
            notes.append(
                f"has {len(names) - len(missing)} of 6 {fmt} batch files, missing "
                f"{', '.join(missing)}"
            )
    return None, "; ".join(notes)


def locate(data_dir: Path | str | None = None) -> tuple[Path, str]:
    """(the first directory holding a complete set of batch files, 'python' or 'binary').

    An explicit ``data_dir`` is the only place looked at.

    Raises:
        DataError: none found; the message lists every place looked at.
    """
    return search.locate(PLACES, _probe, data_dir, download=False)


# --- download and safe extraction ---------------------------------------------------------


def _check_member(member: tarfile.TarInfo, archive: Path) -> None:
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
        raise DataError(
            f"{archive}: refusing to extract {member.name!r} (absolute path, '..', link or "
            "device); this is not the CIFAR-10 release archive"
        )


def extract_python_batches(archive: Path, dest: Path) -> Path:
    """Extract ``cifar-10-batches-py`` from the release archive into ``dest``; returns it.

    Every member is checked first (no absolute paths, no '..', only files and folders), and
    the files are extracted into a temporary folder and moved into place only when all six
    batches are there, so ``dest`` never holds a half-extracted set.
    """
    dest.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest, prefix=".extract-"))
    try:
        try:
            with tarfile.open(archive, "r:gz") as tar:
                members = tar.getmembers()
                for member in members:
                    _check_member(member, archive)
                if hasattr(tarfile, "data_filter"):  # Python >= 3.12 and recent patch releases
                    tar.extractall(tmp, members=members, filter="data")
                else:
                    tar.extractall(tmp, members=members)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise DataError(f"{archive}: cannot extract ({exc}); delete it and retry") from None
        extracted = tmp / PY_FOLDER
        missing = [name for name in BATCHES if not (extracted / name).is_file()]
        if missing:
            raise DataError(
                f"{archive}: has no {PY_FOLDER}/{', '.join(missing)}; not the CIFAR-10 python "
                "release, delete it and retry"
            )
        final = dest / PY_FOLDER
        if not final.exists():
            os.replace(extracted, final)
        else:
            # An incomplete earlier copy: complete it file by file, leaving anything else.
            for name in BATCHES:
                os.replace(extracted / name, final / name)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def download_python_release(
    dest: Path, url: str = ARCHIVE_URL, sha256: str = ARCHIVE_SHA256
) -> Path:
    """Download the python release into ``dest`` (SHA-256-checked) and extract it; returns
    the batch folder. An archive already in ``dest`` (fetched by hand, or left by an
    interrupted extraction) is checked against ``sha256`` and used. The archive is deleted
    once extracted: only the batches are ever read."""
    archive = dest / ARCHIVE_NAME
    if archive.is_file():
        actual = _sha256_of(archive)
        if actual != sha256.lower():
            raise DataError(
                f"{archive}: SHA-256 {actual}, expected {sha256}; a damaged or different "
                "file, delete it and retry"
            )
    else:
        cache.download(url, archive, sha256=sha256)
    folder = extract_python_batches(archive, dest)
    archive.unlink(missing_ok=True)
    return folder


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc}); check permissions") from None
    return digest.hexdigest()


# --- loading ------------------------------------------------------------------------------


def _read_set(directory: Path, fmt: str) -> RawCifar:
    reader = read_python_batch if fmt == "python" else read_binary_batch
    names = FORMATS[fmt]
    parts = [(directory / name, *reader(directory / name)) for name in names]
    first_path, first_images, _ = parts[0]
    for path, images, _ in parts[1:]:
        # The release's six files hold the same number of images; a file that differs was
        # cut short (at a record boundary, so its size alone looks fine) or comes from
        # elsewhere. Smaller consistent sets (as in tests) are accepted.
        if len(images) != len(first_images):
            raise DataError(
                f"{path}: holds {len(images)} images but {first_path.name} holds "
                f"{len(first_images)}; the six batch files of a release are the same size "
                f"({CANONICAL_BATCH_SIZE} each), {_FIX}"
            )
    train = parts[:5]
    return RawCifar(
        train_images=np.concatenate([images for _, images, _ in train]),
        train_labels=np.concatenate([labels for _, _, labels in train]),
        test_images=parts[5][1],
        test_labels=parts[5][2],
        source=str(directory),
        format=fmt,
    )


def load_cifar10(
    data_dir: Path | str | None = None,
    download: bool = True,
    *,
    url: str = ARCHIVE_URL,
    sha256: str = ARCHIVE_SHA256,
) -> RawCifar:
    """Find (or download) and load CIFAR-10, python or binary batches.

    Args:
        data_dir: the directory to read from; when given, the only place looked at (see
            ``candidate_dirs`` for the search without it).
        download: if the search finds nothing, download the python release from ``url``
            into ``cache_dir()/cifar10``, verify its SHA-256, and extract it safely.
        url, sha256: the release archive and its digest (tests point them at a local
            server).

    Raises:
        DataError: ``data_dir`` does not hold the files, or they are nowhere and cannot be
            downloaded (one line naming where it looked and how to provide them), or a file
            is damaged or foreign.
    """
    directory, fmt = search.locate(
        PLACES,
        _probe,
        data_dir,
        download=download,
        fetch=lambda target: (download_python_release(target, url, sha256), "python"),
    )
    return _read_set(directory, fmt)
