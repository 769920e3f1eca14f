"""The IMDB large movie review set (Maas et al. 2011) in its two standard forms.

- The `aclImdb` folder tree, as unpacked from aclImdb_v1.tar.gz: `train/pos`, `train/neg`,
  `test/pos`, `test/neg`, one review per `*.txt` file (25k/25k, balanced). `train/unsup`
  (unlabelled) is ignored. Raw text: tokenized here, vocabulary built on train only.
- Keras's preprocessed `imdb.npz`: `x_train`, `y_train`, `x_test`, `y_test`; the x arrays are
  object arrays of int lists (word ranks, 1 = most frequent), so they are pickled. They are
  unpickled here by a restricted unpickler that can build nothing but numpy arrays: a file
  that asks for anything else is refused before any of it runs.

Search order (`candidate_dirs`, by `trainscale.data.search`): --data-dir alone when given
(a folder, or the file itself), else $TRAINSCALE_DATA_DIR, the cache, ./data, ~/data and
~/.keras/datasets (where Keras keeps imdb.npz). numpy only; no torch.
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trainscale.data import cache, search
from trainscale.data.text import EncodedSplits, check_splits, encode_ids, encode_splits
from trainscale.errors import DataError

DATA_ENV = search.DATA_ENV
NAME = "imdb"

NPZ_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/imdb.npz"
# As Keras's own loader pins it (keras/src/datasets/imdb.py, get_file(file_hash=...)).
NPZ_SHA256 = "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f"
ACLIMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
# The Stanford site publishes no checksum. This SHA-256 of aclImdb_v1.tar.gz is the one
# TensorFlow Datasets publishes for that URL (github.com/tensorflow/datasets,
# tensorflow_datasets/url_checksums/imdb_reviews.txt, 84125825 bytes) and independent
# loaders pin (gomlx's IMDB example, Julia DataDeps registrations), so a changed or damaged
# archive is refused.
ACLIMDB_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"

SPLITS = ("train", "test")
POLARITIES = ("neg", "pos")  # label 0, label 1, as in Keras's imdb.npz
NPZ_MEMBERS = ("x_train", "y_train", "x_test", "y_test")

# Keras's defaults for imdb.load_data: id 0 pads, 1 starts a review, 2 stands for a word
# outside the vocabulary, and word rank r becomes id r + 3.
START_CHAR, OOV_CHAR, INDEX_FROM = 1, 2, 3


# --- where the files are -------------------------------------------------------------------


_WHAT = {
    "aclimdb": "the aclImdb folder (from aclImdb_v1.tar.gz)",
    "npz": "Keras's imdb.npz",
    "auto": "the aclImdb folder or Keras's imdb.npz",
}

_BRIEF = {"aclimdb": "aclImdb/", "npz": "imdb.npz", "auto": "aclImdb/ or imdb.npz"}


def places(fmt: str = "auto") -> search.DatasetPlaces:
    """Where IMDB is looked for: each place as is and as `<place>/imdb`; other tools'
    caches are ./data, ~/data and ~/.keras/datasets. `fmt` only changes the messages."""
    return search.DatasetPlaces(
        name=NAME,
        missing="IMDB not found",
        expected=_WHAT[fmt],
        brief=_BRIEF[fmt],
        folders=(NAME,),
        other_tools=(search.CWD_DATA, search.HOME_DATA, search.KERAS),
        hint=", or a CSV/TSV with -o file=PATH",
    )


def candidate_dirs(data_dir: Path | str | None = None) -> list[Path]:
    """Directories searched, in order, each as is and as `<dir>/imdb`, without duplicates:
    `data_dir` alone when given, else $TRAINSCALE_DATA_DIR, the cache (`cache_dir()/imdb`),
    ./data, ~/data and ~/.keras/datasets."""
    return search.candidate_dirs(places(), data_dir)


def acl_tree_problem(directory: Path) -> str | None:
    """None if `directory` is an aclImdb tree, else what is missing (for error messages)."""
    missing = [f"{s}/{p}" for s in SPLITS for p in POLARITIES if not (directory / s / p).is_dir()]
    return f"missing {', '.join(missing)}" if missing else None


def _probe(fmt: str) -> search.Probe[Path]:
    """The dataset in a directory for format 'aclimdb', 'npz' or 'auto' (a tree first), and
    a note on a near miss, such as a tree without its test split."""

    def probe(directory: Path) -> tuple[Path | None, str]:
        note = ""
        if fmt in ("aclimdb", "auto"):
            for tree in (directory, directory / "aclImdb"):
                problem = acl_tree_problem(tree)
                if problem is None:
                    return tree, ""
                if (tree / "train").is_dir() or (tree / "test").is_dir():
                    note = f"{tree} is not an aclImdb tree ({problem})"
        if fmt in ("npz", "auto") and (directory / "imdb.npz").is_file():
            return directory / "imdb.npz", ""
        return None, note

    return probe


def locate_imdb(data_dir: Path | str | None, fmt: str = "auto", download: bool = True) -> Path:
    """The aclImdb tree or imdb.npz to read, downloading it into the cache if allowed.

    `fmt` 'auto' looks for either (a tree first in each place) and downloads imdb.npz (17 MB
    rather than the 84 MB archive); 'aclimdb' and 'npz' look for and download only that one.
    An explicit `data_dir` (a folder, or the file itself) is the only place looked at.
    """
    return search.locate(
        places(fmt),
        _probe(fmt),
        data_dir,
        download=download,
        fetch=lambda target: download_imdb("aclimdb" if fmt == "aclimdb" else "npz", target),
        on_file=lambda path: path,
    )


# --- downloads -------------------------------------------------------------------------------


def download_imdb(fmt: str, target: Path | None = None) -> Path:
    """Download (checksummed) into `target` (default `cache_dir()/imdb`); returns imdb.npz
    or the aclImdb tree."""
    target = target if target is not None else cache.cache_dir() / NAME
    if fmt == "npz":
        return cache.download(NPZ_URL, target / "imdb.npz", sha256=NPZ_SHA256)
    archive = cache.download(ACLIMDB_URL, target / "aclImdb_v1.tar.gz", sha256=ACLIMDB_SHA256)
    tree = extract_aclimdb(archive, target)
    archive.unlink(missing_ok=True)  # 84 MB that the tree now holds
    return tree


def _wanted(name: str) -> bool:
    """Members worth extracting: the labelled reviews (train/unsup is 50k files unused)."""
    parts = Path(name).parts
    return (
        len(parts) == 4
        and parts[0] == "aclImdb"
        and parts[1] in SPLITS
        and (parts[2] in POLARITIES and parts[3].endswith(".txt"))
    )


def _safe_member(member: tarfile.TarInfo, archive: Path) -> None:
    path = Path(member.name)
    if path.is_absolute() or ".." in path.parts or not member.isfile():
        raise DataError(
            f"{archive}: member {member.name!r} is not a plain file inside the archive; "
            "refusing to extract it (damaged or hostile archive)"
        )


def extract_aclimdb(archive: Path, target: Path) -> Path:
    """Extract the labelled reviews of `archive` into `target/aclImdb`, safely and atomically.

    Only regular files named aclImdb/{train,test}/{pos,neg}/*.txt are extracted, each checked
    to stay inside the destination (no absolute paths, no '..', no links or devices); the
    tree is built in a temporary directory and renamed into place when complete.
    """
    dest = target / "aclImdb"
    tmp = Path(tempfile.mkdtemp(dir=target, prefix=".aclImdb."))
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = [m for m in tar if _wanted(m.name)]
            for member in members:
                _safe_member(member, archive)
            # The 'data' filter (Python >= 3.11.4) re-checks every member the same way.
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, members=members, filter="data")
            else:
                tar.extractall(tmp, members=members)
        problem = acl_tree_problem(tmp / "aclImdb")
        if problem:
            raise DataError(f"{archive} is not the aclImdb archive ({problem})")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp / "aclImdb", dest)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataError(f"cannot extract {archive} ({exc})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


# --- the aclImdb tree ----------------------------------------------------------------------


def _review_names(folder: Path) -> list[str]:
    """The `*.txt` names in `folder` (os.scandir: listing 12,500 names as Path objects and
    sorting those took seconds)."""
    try:
        with os.scandir(folder) as entries:
            return [e.name for e in entries if e.name.endswith(".txt") and not e.is_dir()]
    except OSError as exc:
        raise DataError(f"cannot list {folder} ({exc.strerror or exc})") from None


def _review_order(name: str) -> tuple[int, str]:
    """Stanford's names are `ID_RATING.txt` with unpadded ids ('9_7.txt' before
    '10_8.txt'): their numeric order is the order the set was published in."""
    head = name.split("_", 1)[0]
    return (int(head) if head.isdigit() else sys.maxsize, name)


def acl_files(tree: Path) -> dict[str, list[Path]]:
    """'{split}/{polarity}' -> the sorted *.txt files; DataError if the tree is incomplete."""
    problem = acl_tree_problem(tree)
    if problem:
        raise DataError(
            f"{tree} is not an aclImdb tree ({problem}); expected train/{{pos,neg}}/*.txt and "
            "test/{pos,neg}/*.txt as unpacked from aclImdb_v1.tar.gz"
        )
    files = {}
    for split in SPLITS:
        for polarity in POLARITIES:
            folder = tree / split / polarity
            found = [folder / name for name in sorted(_review_names(folder), key=_review_order)]
            if not found:
                raise DataError(f"{folder} has no .txt reviews: the {split} split is empty")
            files[f"{split}/{polarity}"] = found
    return files


def _read_review(path: Path) -> str:
    """The review in `path`; DataError (one line) for an unreadable, empty or non-UTF-8
    file, the marks of a damaged copy (every review of the set has text)."""
    try:
        text = path.read_text(encoding="utf-8")
        if not text.strip():
            raise DataError(f"{path} is empty: every aclImdb review has text (damaged copy?)")
        return text
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path} cannot be decoded as utf-8 (offset {exc.start}); aclImdb reviews are utf-8"
        ) from None
    except OSError as exc:
        raise DataError(f"cannot read {path} ({exc.strerror or exc})") from None


def load_acl_tree(
    tree: Path, vocab_size: int, max_len: int, strict_vocab: bool = True
) -> EncodedSplits:
    """The tree's reviews, tokenized, with the vocabulary built on train/ only."""
    files = acl_files(tree)
    texts: dict[str, list[str]] = {s: [] for s in SPLITS}
    labels: dict[str, list[int]] = {s: [] for s in SPLITS}
    for split in SPLITS:
        for label, polarity in enumerate(POLARITIES):
            for path in files[f"{split}/{polarity}"]:
                texts[split].append(_read_review(path))
                labels[split].append(label)
    return encode_splits(
        texts["train"],
        np.array(labels["train"], dtype=np.int64),
        texts["test"],
        np.array(labels["test"], dtype=np.int64),
        list(POLARITIES),
        vocab_size,
        max_len,
        str(tree),
        strict_vocab,
    )


# --- Keras's imdb.npz ------------------------------------------------------------------------


def _numpy_globals() -> dict[tuple[str, str], object]:
    """The only callables an object-array pickle of int lists needs, under the module names
    numpy 1.x and 2.x write ('numpy.core' and 'numpy._core')."""
    reconstruct = np.empty(0, dtype=object).__reduce__()[0]
    scalar = np.int64(0).__reduce__()[0]  # numpy ints inside the lists
    allowed: dict[tuple[str, str], object] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[(module, "_reconstruct")] = reconstruct
        allowed[(module, "scalar")] = scalar
    return allowed


class RefusedGlobal(pickle.UnpicklingError):
    """A pickle asked for a callable outside the allowed few."""


class _ArrayOnlyUnpickler(pickle.Unpickler):
    """Builds numpy arrays, dtypes and scalars and plain containers; nothing else."""

    allowed = _numpy_globals()

    def find_class(self, module: str, name: str) -> object:
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise RefusedGlobal(f"{module}.{name}") from None


def _read_npy(raw: bytes, member: str, path: Path) -> np.ndarray:
    """One .npy member: plain arrays through numpy (no pickle), object arrays through the
    restricted unpickler."""
    stream = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f".npy format version {version} is not supported")
        if not dtype.hasobject:
            stream.seek(0)
            return np.lib.format.read_array(stream, allow_pickle=False)
        array = _ArrayOnlyUnpickler(stream).load()
    except RefusedGlobal as exc:
        raise DataError(
            f"{path}: {member} holds a pickle that asks for {exc}; refusing to load it "
            "(not a genuine imdb.npz)"
        ) from None
    except Exception as exc:  # any other parse failure means a corrupt member
        raise DataError(f"{path}: {member} is not a readable .npy array ({exc})") from None
    if not isinstance(array, np.ndarray) or array.shape != shape:
        raise DataError(f"{path}: {member} does not hold the array its header announces")
    return array


def read_imdb_npz(path: Path) -> dict[str, np.ndarray]:
    """The four arrays of a Keras imdb.npz, never running code stored in the file."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            missing = [m for m in NPZ_MEMBERS if f"{m}.npy" not in names]
            if missing:
                raise DataError(
                    f"{path} is not a Keras imdb.npz: no {', '.join(missing)} (it has "
                    f"{', '.join(sorted(n.removesuffix('.npy') for n in names)) or 'nothing'})"
                )
            arrays = {m: _read_npy(archive.read(f"{m}.npy"), m, path) for m in NPZ_MEMBERS}
    except FileNotFoundError:
        raise DataError(f"{path} does not exist") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataError(f"{path} is not a readable .npz (zip) file ({exc})") from None
    for split in SPLITS:
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 1 or y.ndim != 1 or len(x) != len(y):
            raise DataError(
                f"{path}: x_{split} has shape {x.shape} and y_{split} {y.shape}; expected two "
                "1-D arrays of equal length"
            )
    return arrays


def _as_rank_lists(x: np.ndarray, member: str, path: Path) -> list[list[int]]:
    try:
        lists = [[int(w) for w in seq] for seq in x]
    except (TypeError, ValueError):
        raise DataError(f"{path}: {member} does not hold lists of word indices") from None
    # Word ranks count from 1: a negative one would index the embedding from its end, or
    # fail in the workers mid-run, far from the file that holds it.
    for index, seq in enumerate(lists):
        if seq and min(seq) < 0:
            raise DataError(
                f"{path}: {member}[{index}] holds the word index {min(seq)}; word indices "
                "are ranks >= 0"
            )
    return lists


def keras_ids(
    ranks: Sequence[Sequence[int]], vocab_size: int, start_char: int | None = START_CHAR
) -> list[list[int]]:
    """Keras's conventions: a start id, rank r -> r + INDEX_FROM, ids >= vocab_size -> OOV."""
    head = [start_char] if start_char is not None else []
    return [
        head + [w + INDEX_FROM if w + INDEX_FROM < vocab_size else OOV_CHAR for w in seq]
        for seq in ranks
    ]


def load_imdb_npz(
    path: Path, vocab_size: int, max_len: int, strict_vocab: bool = True
) -> EncodedSplits:
    """imdb.npz as encoded splits, with Keras's index conventions and `vocab_size` ids."""
    arrays = read_imdb_npz(path)
    ranks = {s: _as_rank_lists(arrays[f"x_{s}"], f"x_{s}", path) for s in SPLITS}
    labels = {s: arrays[f"y_{s}"].astype(np.int64) for s in SPLITS}
    check_splits(labels["train"], labels["test"], str(path), 2)
    if any(not set(np.unique(y)) <= {0, 1} for y in labels.values()):
        raise DataError(f"{path}: labels must be 0 (negative) or 1 (positive)")
    top = max((max(seq) for seq in ranks["train"] if seq), default=0)
    available = top + INDEX_FROM + 1
    if not strict_vocab:
        vocab_size = min(vocab_size, available)
    elif vocab_size > available:
        raise DataError(
            f"vocab_size {vocab_size} is larger than the data: {path} has word ids up to "
            f"{available - 1}; use -o vocab_size={available} or less"
        )
    train_ids, _ = encode_ids(keras_ids(ranks["train"], vocab_size), max_len)
    test_ids, _ = encode_ids(keras_ids(ranks["test"], vocab_size), max_len)
    return EncodedSplits(
        train_ids=train_ids,
        train_labels=labels["train"],
        test_ids=test_ids,
        test_labels=labels["test"],
        vocab_size=vocab_size,
        classes=list(POLARITIES),
        source=str(path),
        max_len=max_len,
    )
