"""MNIST and Fashion-MNIST: find the four standard IDX files, or download them, and load them.

numpy only (no torch), so importing this is cheap; turning arrays into tensors is the
workload's business.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainscale.data import cache, search
from trainscale.data.idx import read_idx
from trainscale.errors import DataError

DATA_ENV = search.DATA_ENV

TRAIN_IMAGES = "train-images-idx3-ubyte"
TRAIN_LABELS = "train-labels-idx1-ubyte"
TEST_IMAGES = "t10k-images-idx3-ubyte"
TEST_LABELS = "t10k-labels-idx1-ubyte"


@dataclass(frozen=True)
class IdxDatasetSpec:
    """An image-classification dataset shipped as the four standard IDX files."""

    name: str
    """Our name for it, also the sub-directory in the cache and in a data directory."""
    torchvision_name: str
    """torchvision's class name, which names its layout ``<root>/<torchvision_name>/raw``."""
    mirrors: tuple[str, ...]
    """Base URLs (ending in '/') tried in order; each serves ``<file>.gz``."""
    gz_sha256: tuple[tuple[str, str], ...]
    """(file name without .gz, SHA-256 of the .gz as served by the mirrors), for the four
    files."""
    num_train: int = 60_000
    """Training examples in the canonical release."""
    num_test: int = 10_000
    """Test examples in the canonical release."""
    image_shape: tuple[int, int] = (28, 28)
    """Height and width of every image."""
    num_classes: int = 10
    """Labels are integers in [0, num_classes)."""
    train_labels_sha256: str = ""
    """SHA-256 of the canonical training labels (the decompressed values, one byte each):
    how a set of another dataset's files under the same four names is told apart."""

    @property
    def files(self) -> tuple[str, ...]:
        """The four file names, without the optional .gz."""
        return tuple(name for name, _ in self.gz_sha256)


# SHA-256 digests as TensorFlow Datasets publishes them (github.com/tensorflow/datasets,
# tensorflow_datasets/url_checksums/mnist.txt and fashion_mnist.txt: URL, size in bytes,
# SHA-256 of each .gz). They are digests of the mirrors' .gz files, so they only apply to
# downloads: files a user already has may be re-compressed (or not compressed) copies.
# They could not be recomputed here (no network, and the local copies of the data are
# re-gzipped), so they were cross-checked: the sizes TFDS lists are those yann.lecun.com
# publishes (9912422 bytes for the training images, ...); other loaders pin the same MNIST
# digests for the ossci-datasets and yann.lecun.com URLs (so every MNIST mirror below
# serves these bytes); and for Fashion-MNIST independent loaders list each SHA-256 beside
# the MD5 that Zalando publishes for the file (8d4fb7e6... for the training images).
MNIST = IdxDatasetSpec(
    name="mnist",
    torchvision_name="MNIST",
    # torchvision's S3 mirror first: yann.lecun.com is often slow or refuses requests. The
    # Google Cloud copy is the one TensorFlow Datasets downloads and publishes digests for.
    mirrors=(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ),
    gz_sha256=(
        (TRAIN_IMAGES, "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
        (TRAIN_LABELS, "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
        (TEST_IMAGES, "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
        (TEST_LABELS, "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"),
    ),
    train_labels_sha256="1feba77c54802fa5339a11837ea4b2866434b83314ec45192930f1df69120c13",
)

FASHION_MNIST = IdxDatasetSpec(
    name="fashion-mnist",
    torchvision_name="FashionMNIST",
    mirrors=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
    gz_sha256=(
        (TRAIN_IMAGES, "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"),
        (TRAIN_LABELS, "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"),
        (TEST_IMAGES, "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"),
        (TEST_LABELS, "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"),
    ),
    train_labels_sha256="657fbd221bfc9f4198cc14b5619cc33ec57c58dd0e47af4d99d6650759e869a7",
)
IDX_DATASETS = (MNIST, FASHION_MNIST)
"""The IDX datasets known here: the same four file names each, told apart by their labels."""


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


def places(spec: IdxDatasetSpec) -> search.DatasetPlaces:
    """Where ``spec`` is looked for: each place as is, as ``<place>/<name>`` and as
    torchvision's ``<place>/<TorchvisionName>/raw``; other tools' caches are ``./data``,
    ``~/data`` and ``~/.cache/torchvision``."""
    files = ", ".join(f"{name}[.gz]" for name in spec.files)
    return search.DatasetPlaces(
        name=spec.name,
        missing=f"{spec.name} not found",
        expected=f"the four IDX files ({files})",
        brief="its four IDX files",
        folders=(spec.name, f"{spec.torchvision_name}/raw"),
        other_tools=(search.CWD_DATA, search.HOME_DATA, search.TORCHVISION),
    )


def candidate_dirs(spec: IdxDatasetSpec, data_dir: Path | str | None = None) -> list[Path]:
    """Every directory ``locate`` looks in, in order, without duplicates.

    ``data_dir`` alone when given; otherwise ``$TRAINSCALE_DATA_DIR``, the cache
    ``cache_dir()/<name>``, then ``./data``, ``~/data`` and ``~/.cache/torchvision``
    (``trainscale.data.search`` has the rule), each as is, as ``<root>/<name>`` and as
    ``<root>/<TorchvisionName>/raw``.
    """
    return search.candidate_dirs(places(spec), data_dir)


def _find_file(directory: Path, name: str) -> Path | None:
    # Prefer the extracted file (torchvision keeps both): it reads without decompression.
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _files_in(spec: IdxDatasetSpec, directory: Path) -> tuple[dict[str, Path], list[str]]:
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


def _probe(spec: IdxDatasetSpec) -> search.Probe[Path]:
    """A complete set of the four files in a directory; a note on a partial one."""

    def probe(directory: Path) -> tuple[Path | None, str]:
        found, missing = _files_in(spec, directory)
        if not missing:
            return directory, ""
        # A partial set is worth naming: it is usually an interrupted copy or a typo.
        note = f"has {len(found)} of 4 files, missing {', '.join(missing)}" if found else ""
        return None, note

    return probe


def locate(spec: IdxDatasetSpec, data_dir: Path | str | None = None) -> Path:
    """The first directory holding all four files of ``spec`` (each gzipped or not).

    See ``candidate_dirs`` for the search order; an explicit ``data_dir`` is the only
    place looked at.

    Raises:
        DataError: no complete set was found; the message lists every place looked at.
    """
    return search.locate(places(spec), _probe(spec), data_dir, download=False)


def _download_into(spec: IdxDatasetSpec, directory: Path) -> Path:
    """Fetch any missing .gz file into ``directory``, SHA-256-checked; returns it.

    Raises:
        DataError: every mirror failed for a file (the message holds each failure).
    """
    for name, sha256 in spec.gz_sha256:
        if _find_file(directory, name) is not None:
            # Kept from an earlier, interrupted run: download() only ever leaves whole,
            # verified files at the final name.
            continue
        errors = []
        for mirror in spec.mirrors:
            try:
                cache.download(f"{mirror}{name}.gz", directory / f"{name}.gz", sha256=sha256)
                break
            except DataError as exc:
                errors.append(str(exc))
        else:
            # Same mirrors, same network: the other files would fail the same way.
            raise DataError(" | ".join(errors))
    return directory


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


def refuse_another_dataset(spec: IdxDatasetSpec, train_labels: np.ndarray, directory: Path) -> None:
    """DataError where the files read as `spec` are another known dataset's (Fashion-MNIST
    ships under MNIST's file names, and a run would report its accuracy as MNIST's)."""
    digest = hashlib.sha256(
        np.ascontiguousarray(train_labels, dtype=np.uint8).tobytes()
    ).hexdigest()
    for other in IDX_DATASETS:
        if other.name != spec.name and digest == other.train_labels_sha256:
            raise DataError(
                f"{directory} holds {other.name}, not {spec.name} (its training labels are "
                f"{other.name}'s); point --data-dir at {spec.name}'s files"
            )


def load_idx_dataset(
    spec: IdxDatasetSpec, data_dir: Path | str | None = None, download: bool = True
) -> RawImageData:
    """Find (or download) and load an IDX image-classification dataset.

    Args:
        spec: which dataset, e.g. ``MNIST`` or ``FASHION_MNIST``.
        data_dir: the directory to read from; when given, the only place looked at (see
            ``candidate_dirs`` for the search without it).
        download: if the search finds nothing, download the .gz files from
            ``spec.mirrors`` into ``cache_dir()/<name>``, verifying each against its
            SHA-256.

    Returns:
        The four arrays and the directory they were read from.

    Raises:
        DataError: ``data_dir`` does not hold the files (one line naming it and what it
            should hold), or the files are nowhere and cannot be downloaded (one line lists
            every place looked at, every download failure, and how to provide the files),
            or a file is corrupt or inconsistent with its partner.
    """
    directory = search.locate(
        places(spec),
        _probe(spec),
        data_dir,
        download=download,
        fetch=lambda target: _download_into(spec, target),
    )
    files, _ = _files_in(spec, directory)
    train_images, train_labels = _load_pair(files[TRAIN_IMAGES], files[TRAIN_LABELS], spec)
    refuse_another_dataset(spec, train_labels, directory)
    test_images, test_labels = _load_pair(files[TEST_IMAGES], files[TEST_LABELS], spec)
    for split, images in (("training", train_images), ("test", test_images)):
        if not len(images):  # nothing to train on, or to score: no run can use them
            raise DataError(
                f"the {split} split of {spec.name} in {directory} is empty (0 images): "
                "damaged or placeholder files?"
            )
    return RawImageData(
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        source=str(directory),
    )
