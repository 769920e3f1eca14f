"""MNIST and Fashion-MNIST: find the four standard IDX files, or download them, and load them.

numpy only (no torch), so importing this is cheap; turning arrays into tensors is the
workload's business.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainscale.data import cache
from trainscale.data.idx import read_idx
from trainscale.errors import ConfigError, DataError

DATA_ENV = "TRAINSCALE_DATA_DIR"

TRAIN_IMAGES = "train-images-idx3-ubyte"
TRAIN_LABELS = "train-labels-idx1-ubyte"
TEST_IMAGES = "t10k-images-idx3-ubyte"
TEST_LABELS = "t10k-labels-idx1-ubyte"
STANDARD_FILES = (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)


@dataclass(frozen=True)
class IdxDatasetSpec:
    """An image-classification dataset shipped as the four standard IDX files."""

    name: str
    """Our name for it, also the sub-directory in the cache and in a data directory."""
    torchvision_name: str
    """torchvision's class name, which names its layout ``<root>/<torchvision_name>/raw``."""
    mirrors: tuple[str, ...]
    """Base URLs (ending in '/') tried in order; each serves ``<file>.gz``."""
    gz_md5: tuple[tuple[str, str], ...]
    """(file name without .gz, MD5 of the .gz as served by the mirrors), for the four files."""
    num_train: int = 60_000
    """Training examples in the canonical release."""
    num_test: int = 10_000
    """Test examples in the canonical release."""
    image_shape: tuple[int, int] = (28, 28)
    """Height and width of every image."""
    num_classes: int = 10
    """Labels are integers in [0, num_classes)."""

    @property
    def files(self) -> tuple[str, ...]:
        """The four file names, without the optional .gz."""
        return tuple(name for name, _ in self.gz_md5)


# Digests as torchvision lists them (torchvision/datasets/mnist.py, MNIST.resources and
# FashionMNIST.resources). They are digests of the mirrors' .gz files, so they only apply to
# downloads: files a user already has may be re-compressed (or not compressed) copies.
MNIST = IdxDatasetSpec(
    name="mnist",
    torchvision_name="MNIST",
    # torchvision's S3 mirror first: yann.lecun.com is often slow or refuses requests.
    mirrors=(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ),
    gz_md5=(
        (TRAIN_IMAGES, "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        (TRAIN_LABELS, "d53e105ee54ea40749a09fcbcd1e9432"),
        (TEST_IMAGES, "9fb629c4189551a2d022fa330f9573f3"),
        (TEST_LABELS, "ec29112dd5afa0611ce80d1b7f02629c"),
    ),
)

FASHION_MNIST = IdxDatasetSpec(
    name="fashion-mnist",
    torchvision_name="FashionMNIST",
    mirrors=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
    gz_md5=(
        (TRAIN_IMAGES, "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        (TRAIN_LABELS, "25c81989df183df01b3e8a0aad5dffbe"),
        (TEST_IMAGES, "bef4ecab320f06d8554ea6380940ec79"),
        (TEST_LABELS, "bb300cfdad3c16e7a12a480ee83cd310"),
    ),
)

IDX_DATASETS = {spec.name: spec for spec in (MNIST, FASHION_MNIST)}


def get_spec(name: str) -> IdxDatasetSpec:
    """The spec registered under ``name``; ConfigError listing the valid names otherwise."""
    try:
        return IDX_DATASETS[name]
    except KeyError:
        valid = ", ".join(sorted(IDX_DATASETS))
        raise ConfigError(f"unknown IDX dataset {name!r}; valid names: {valid}") from None


@dataclass(frozen=True)
class RawImageData:
    """A dataset as loaded from disk: uint8 arrays, not yet normalised or on a device."""

    train_images: np.ndarray
    """(N, H, W) uint8."""
    train_labels: np.ndarray
    """(N,) uint8."""
    test_images: np.ndarray
    """(M, H, W) uint8."""
    test_labels: np.ndarray
    """(M,) uint8."""
    source: str
    """The directory the files were read from."""


def _env_path(var: str) -> Path | None:
    value = os.environ.get(var)
    return Path(value).expanduser() if value else None


def candidate_dirs(spec: IdxDatasetSpec, data_dir: Path | str | None = None) -> list[Path]:
    """Every directory ``locate`` looks in, in order, without duplicates.

    Roots, in order: ``data_dir``, ``$TRAINSCALE_DATA_DIR``, then (after our own cache dir
    ``cache_dir()/<name>``) the places other tools commonly leave these files: ``./data``,
    ``~/data`` and ``~/.cache/torchvision``. Each root is tried as is, as ``root/<name>`` and
    as torchvision's ``root/<TorchvisionName>/raw``.
    """
    home = Path.home()
    layouts = (Path(), Path(spec.name), Path(spec.torchvision_name, "raw"))

    def expand(root: Path | None) -> list[Path]:
        return [] if root is None else [root / sub for sub in layouts]

    dirs = [
        *expand(Path(data_dir).expanduser() if data_dir is not None else None),
        *expand(_env_path(DATA_ENV)),
        cache.cache_dir() / spec.name,
        *expand(Path.cwd() / "data"),
        *expand(home / "data"),
        *expand(home / ".cache" / "torchvision"),
    ]
    seen: set[str] = set()
    unique = []
    for d in dirs:
        key = os.path.abspath(d)
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


def _find_file(directory: Path, name: str) -> Path | None:
    # Prefer the extracted file (torchvision keeps both): it reads without decompression.
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _probe(spec: IdxDatasetSpec, directory: Path) -> tuple[dict[str, Path], list[str]]:
    """(files found, names missing) for the four files in ``directory``."""
    found: dict[str, Path] = {}
    missing: list[str] = []
    for name in spec.files:
        path = _find_file(directory, name)
        if path is None:
            missing.append(name)
        else:
            found[name] = path
    return found, missing


def _search(spec: IdxDatasetSpec, data_dir: Path | str | None) -> tuple[Path | None, list[str]]:
    """The first complete directory (or None) and a description of every place looked at."""
    looked: list[str] = []
    for directory in candidate_dirs(spec, data_dir):
        found, missing = _probe(spec, directory)
        if not missing:
            return directory, looked
        # A partial set is worth naming: it is usually an interrupted copy or a typo.
        note = f" (has {len(found)} of 4 files, missing {', '.join(missing)})" if found else ""
        looked.append(f"{directory}{note}")
    return None, looked


def _how_to_provide(spec: IdxDatasetSpec) -> str:
    files = ", ".join(f"{name}[.gz]" for name in spec.files)
    return (
        f"Put the four IDX files ({files}) in {cache.cache_dir() / spec.name}, "
        f"or in a directory given by --data-dir or {DATA_ENV}"
    )


def locate(spec: IdxDatasetSpec, data_dir: Path | str | None = None) -> Path:
    """The first directory holding all four files of ``spec`` (each gzipped or not).

    See ``candidate_dirs`` for the search order.

    Raises:
        DataError: no complete set was found; the message lists every place looked at.
    """
    found, looked = _search(spec, data_dir)
    if found is None:
        raise DataError(
            f"{spec.name} not found; looked in: {'; '.join(looked)}. {_how_to_provide(spec)}"
        )
    return found


def _download_into(spec: IdxDatasetSpec, directory: Path) -> list[str]:
    """Fetch any missing .gz file into ``directory``; the failures, empty on success."""
    failures: list[str] = []
    for name, md5 in spec.gz_md5:
        if _find_file(directory, name) is not None:
            # Kept from an earlier, interrupted run: download() only ever leaves whole,
            # verified files at the final name.
            continue
        errors = []
        for mirror in spec.mirrors:
            try:
                cache.download(f"{mirror}{name}.gz", directory / f"{name}.gz", md5=md5)
                break
            except DataError as exc:
                errors.append(str(exc))
        else:
            failures.extend(errors)
            # Same mirrors, same network: the other files would fail the same way.
            break
    return failures


def _load_pair(
    images_path: Path, labels_path: Path, spec: IdxDatasetSpec
) -> tuple[np.ndarray, np.ndarray]:
    images = read_idx(images_path, expect_ndim=3)
    labels = read_idx(labels_path, expect_ndim=1)
    if images.shape[1:] != spec.image_shape:
        raise DataError(
            f"{images_path}: images are {images.shape[1]}x{images.shape[2]}, expected "
            f"{spec.image_shape[0]}x{spec.image_shape[1]} for {spec.name}; wrong dataset?"
        )
    if len(images) != len(labels):
        raise DataError(
            f"{images_path} has {len(images)} images but {labels_path} has {len(labels)} "
            "labels; the files come from different releases, replace them with a matching set"
        )
    if labels.size and int(labels.max()) >= spec.num_classes:
        raise DataError(
            f"{labels_path}: label {int(labels.max())} is out of range for {spec.name} "
            f"(0..{spec.num_classes - 1}); wrong or corrupt label file"
        )
    return images, labels


def load_idx_dataset(
    spec: IdxDatasetSpec, data_dir: Path | str | None = None, download: bool = True
) -> RawImageData:
    """Find (or download) and load an IDX image-classification dataset.

    Args:
        spec: which dataset, e.g. ``MNIST`` or ``FASHION_MNIST``.
        data_dir: a directory to look in first (see ``candidate_dirs`` for the rest).
        download: if nothing is found, download the .gz files from ``spec.mirrors`` into
            ``cache_dir()/<name>``, verifying each against its MD5.

    Returns:
        The four arrays and the directory they were read from.

    Raises:
        DataError: the files are nowhere and cannot be downloaded (one message lists every
            place looked at, every download failure, and how to provide the files), or a
            file is corrupt or inconsistent with its partner.
    """
    directory, looked = _search(spec, data_dir)
    if directory is None:
        failures: list[str] = []
        if download:
            target = cache.cache_dir() / spec.name
            failures = _download_into(spec, target)
            if not failures:
                directory = target
        if directory is None:
            tried = f"; download failed: {' | '.join(failures)}" if failures else ""
            off = "" if download else " (download disabled)"
            raise DataError(
                f"{spec.name} not found{off}; looked in: {'; '.join(looked)}{tried}. "
                f"{_how_to_provide(spec)}"
            )

    files, _ = _probe(spec, directory)
    train_images, train_labels = _load_pair(files[TRAIN_IMAGES], files[TRAIN_LABELS], spec)
    test_images, test_labels = _load_pair(files[TEST_IMAGES], files[TEST_LABELS], spec)
    return RawImageData(
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        source=str(directory),
    )
