"""MNIST-family data layer: search order, validation, cache and verified downloads.

Every test runs with HOME, the cache, the data-dir variable and the working directory pointed
into tmp_path, and downloads come from a local http.server: nothing touches the real home
or the internet.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from trainscale.data import cache
from trainscale.data import mnist as mnist_module
from trainscale.data.mnist import (
    FASHION_MNIST,
    MNIST,
    TEST_IMAGES,
    TEST_LABELS,
    TRAIN_IMAGES,
    TRAIN_LABELS,
    IdxDatasetSpec,
    candidate_dirs,
    load_idx_dataset,
    locate,
)
from trainscale.errors import DataError

from tests.helpers.mnist_files import write_idx

STANDARD_FILES = (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)
NUM_TRAIN, NUM_TEST = 6, 4


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolate every location the search consults; returns the tmp root."""
    for name in ("home", "cache", "cwd"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


def make_dataset(
    directory: Path,
    *,
    marker: int = 0,
    gzip: bool | None = None,
    num_train: int = NUM_TRAIN,
    num_train_labels: int | None = None,
    max_label: int = 9,
    image_shape: tuple[int, int] = (28, 28),
) -> Path:
    """Write the four files into ``directory``; ``marker`` fills pixel [0,0,0] to tell sets
    apart. ``gzip=None`` mixes formats (images gzipped, labels plain)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(marker)
    arrays = {}
    for prefix, n, n_labels in (
        ("train", num_train, num_train_labels if num_train_labels is not None else num_train),
        ("t10k", NUM_TEST, NUM_TEST),
    ):
        images = rng.integers(0, 256, size=(n, *image_shape), dtype=np.uint8)
        if n:
            images[0, 0, 0] = marker
        labels = rng.integers(0, max_label + 1, size=n_labels, dtype=np.uint8)
        if n_labels:
            labels[0] = max_label
        arrays[f"{prefix}-images-idx3-ubyte"] = images
        arrays[f"{prefix}-labels-idx1-ubyte"] = labels
    for name, array in arrays.items():
        compress = ("images" in name) if gzip is None else gzip
        write_idx(directory / (f"{name}.gz" if compress else name), array, gzip=compress)
    return directory


def marker_of(directory: Path | str, spec: IdxDatasetSpec = MNIST) -> int:
    data = load_idx_dataset(spec, directory, download=False)
    assert data.source == str(directory)
    return int(data.train_images[0, 0, 0])


# --- loading and validation -------------------------------------------------------------


@pytest.mark.parametrize("gzip", [True, False, None], ids=["gz", "plain", "mixed"])
def test_load_shapes_and_dtypes(env: Path, gzip: bool | None) -> None:
    root = make_dataset(env / "d", gzip=gzip)
    data = load_idx_dataset(MNIST, root, download=False)
    assert data.train_images.shape == (NUM_TRAIN, 28, 28)
    assert data.train_labels.shape == (NUM_TRAIN,)
    assert data.test_images.shape == (NUM_TEST, 28, 28)
    assert data.test_labels.shape == (NUM_TEST,)
    for array in (data.train_images, data.train_labels, data.test_images, data.test_labels):
        assert array.dtype == np.uint8
    assert data.source == str(root)
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.source = "elsewhere"  # type: ignore[misc]


def test_plain_preferred_over_gz(env: Path) -> None:
    root = make_dataset(env / "d", marker=1, gzip=False)
    # A stale or different .gz next to the extracted file, as torchvision leaves them.
    other = make_dataset(env / "other", marker=2, gzip=True)
    for name in STANDARD_FILES:
        (root / f"{name}.gz").write_bytes((other / f"{name}.gz").read_bytes())
    assert marker_of(root) == 1


def test_count_mismatch_between_images_and_labels(env: Path) -> None:
    root = make_dataset(env / "d", num_train_labels=NUM_TRAIN - 1)
    with pytest.raises(DataError) as info:
        load_idx_dataset(MNIST, root, download=False)
    message = str(info.value)
    assert "train-images-idx3-ubyte" in message and "train-labels-idx1-ubyte" in message
    assert f"{NUM_TRAIN} images" in message and f"{NUM_TRAIN - 1} labels" in message


def test_label_out_of_range(env: Path) -> None:
    root = make_dataset(env / "d", max_label=10)
    with pytest.raises(DataError, match=r"label 10 is out of range"):
        load_idx_dataset(MNIST, root, download=False)


def test_wrong_image_size(env: Path) -> None:
    root = make_dataset(env / "d", image_shape=(32, 32))
    with pytest.raises(DataError, match=r"32x32, expected 28x28"):
        load_idx_dataset(MNIST, root, download=False)


def test_swapped_files_are_reported(env: Path) -> None:
    root = make_dataset(env / "d", gzip=False)
    images, labels = root / "train-images-idx3-ubyte", root / "train-labels-idx1-ubyte"
    tmp = root / "swap"
    images.rename(tmp)
    labels.rename(images)
    tmp.rename(labels)
    with pytest.raises(DataError, match="swapped"):
        load_idx_dataset(MNIST, root, download=False)


def test_corrupt_file_names_the_file(env: Path) -> None:
    root = make_dataset(env / "d", gzip=True)
    bad = root / "t10k-images-idx3-ubyte.gz"
    bad.write_bytes(bad.read_bytes()[:-20])
    with pytest.raises(DataError, match=str(bad)):
        load_idx_dataset(MNIST, root, download=False)


# --- search order ------------------------------------------------------------------------


def test_data_dir_beats_env_beats_cache(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arg = make_dataset(env / "arg", marker=1)
    from_env = make_dataset(env / "envdir", marker=2)
    cached = make_dataset(env / "cache" / "mnist", marker=3)
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(from_env))
    assert locate(MNIST, arg) == arg
    assert marker_of(arg) == 1
    assert locate(MNIST) == from_env
    assert int(load_idx_dataset(MNIST, download=False).train_images[0, 0, 0]) == 2
    monkeypatch.delenv("TRAINSCALE_DATA_DIR")
    assert locate(MNIST) == cached
    # An explicit data_dir without the files is refused: it never falls through to the
    # next place, even when that place holds a complete set.
    (env / "empty").mkdir()
    for data_dir in (env / "empty", env / "missing"):
        for call in (locate, load_idx_dataset):
            with pytest.raises(DataError) as info:
                call(MNIST, data_dir)
            message = str(info.value)
            assert message.startswith(f"mnist not found in {data_dir} (--data-dir)")
            assert "train-images-idx3-ubyte[.gz]" in message and "\n" not in message
    assert _files_under(env / "cache") == _files_under(cached)  # nothing downloaded


def test_cache_beats_other_tools(env: Path) -> None:
    make_dataset(env / "home" / "data" / "MNIST" / "raw", marker=1)
    cached = make_dataset(env / "cache" / "mnist", marker=2)
    assert locate(MNIST) == cached


@pytest.mark.parametrize(
    ("spec", "sub"),
    [
        (MNIST, "."),
        (MNIST, "mnist"),
        (MNIST, "MNIST/raw"),
        (FASHION_MNIST, "fashion-mnist"),
        (FASHION_MNIST, "FashionMNIST/raw"),
    ],
)
def test_sub_layouts(env: Path, spec: IdxDatasetSpec, sub: str) -> None:
    root = env / "root"
    target = make_dataset(root / sub)
    assert locate(spec, root) == root / Path(sub)
    assert load_idx_dataset(spec, root, download=False).source == str(target)


def test_fashion_does_not_pick_up_mnist(env: Path) -> None:
    root = env / "root"
    make_dataset(root / "mnist")
    with pytest.raises(DataError, match="fashion-mnist not found"):
        locate(FASHION_MNIST, root)


@pytest.mark.parametrize(
    "where",
    ["cwd/data", "cwd/data/MNIST/raw", "home/data/mnist", "home/.cache/torchvision/MNIST/raw"],
)
def test_other_tools_caches(env: Path, where: str) -> None:
    target = make_dataset(env / where)
    assert locate(MNIST).resolve() == target.resolve()


def test_partial_directory_does_not_count(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    partial = make_dataset(env / "partial", marker=1)
    (partial / "t10k-labels-idx1-ubyte").unlink()
    cached = make_dataset(env / "cache" / "mnist", marker=2)
    # Given explicitly, a partial set is refused with what it lacks.
    with pytest.raises(DataError) as info:
        locate(MNIST, partial)
    assert "has 3 of 4 files, missing t10k-labels-idx1-ubyte" in str(info.value)
    # On the search path, it is passed over for the next complete set.
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(partial))
    assert locate(MNIST) == cached
    cached_file = cached / "train-labels-idx1-ubyte"
    cached_file.unlink()
    with pytest.raises(DataError) as info:
        locate(MNIST)
    message = str(info.value)
    assert "has 3 of 4 files, missing t10k-labels-idx1-ubyte" in message
    assert "missing train-labels-idx1-ubyte" in message


def _named(message: str, place: Path, env: Path) -> bool:
    """The place, or the search root it lies under (below `env`), is named in `message`:
    one-line errors name the roots searched (`~/data`, `./data`), not every subfolder."""
    home = env / "home"
    for root in (place, *place.parents):
        if env not in root.parents:
            break
        spellings = {str(root)}
        if root == home or home in root.parents:
            spellings.add("~/" + str(root.relative_to(home)))
        if Path.cwd() in root.parents:
            spellings.add("./" + str(root.relative_to(Path.cwd())))
        if any(s in message for s in spellings):
            return True
    return False


def test_not_found_lists_every_place(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(env / "envdir"))
    places = candidate_dirs(MNIST)
    expected = [
        env / "envdir",
        env / "envdir" / "mnist",
        env / "envdir" / "MNIST" / "raw",
        env / "cache" / "mnist",
    ]
    assert places[: len(expected)] == expected
    home = env / "home"
    assert home / "data" / "MNIST" / "raw" in places
    assert home / ".cache" / "torchvision" / "MNIST" / "raw" in places
    assert Path.cwd() / "data" in places
    for call in (
        lambda: locate(MNIST),
        lambda: load_idx_dataset(MNIST, download=False),
    ):
        with pytest.raises(DataError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message
        for place in places:
            assert _named(message, place, env), place
        assert str(env / "cache" / "mnist") in message  # where to put the files
        assert "--data-dir" in message and "TRAINSCALE_DATA_DIR" in message


def test_explicit_dir_is_the_only_place(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(make_dataset(env / "envdir")))
    places = candidate_dirs(MNIST, env / "arg")
    assert places == [env / "arg", env / "arg" / "mnist", env / "arg" / "MNIST" / "raw"]
    (env / "arg" / "MNIST" / "raw").mkdir(parents=True)
    for call in (
        lambda: locate(MNIST, env / "arg"),
        lambda: load_idx_dataset(MNIST, env / "arg", download=False),
    ):
        with pytest.raises(DataError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message
        for place in places:
            assert str(place) in message
        assert str(env / "envdir") not in message  # never looked at
        assert "leave out --data-dir to search TRAINSCALE_DATA_DIR and the cache" in message
        assert "--data-dir" in message and "TRAINSCALE_DATA_DIR" in message


def test_explicit_file_is_refused(env: Path) -> None:
    not_a_folder = env / "train-images-idx3-ubyte"
    not_a_folder.write_bytes(b"")
    with pytest.raises(DataError, match="it is a file, not a folder"):
        load_idx_dataset(MNIST, not_a_folder)


def test_specs_hold_the_canonical_digests() -> None:
    # TensorFlow Datasets, tensorflow_datasets/url_checksums/mnist.txt and fashion_mnist.txt.
    assert dict(MNIST.gz_sha256)["train-images-idx3-ubyte"] == (
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"
    )
    assert dict(FASHION_MNIST.gz_sha256)["t10k-labels-idx1-ubyte"] == (
        "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"
    )
    for spec in (MNIST, FASHION_MNIST):
        assert spec.files == STANDARD_FILES
        assert all(len(sha) == 64 and int(sha, 16) >= 0 for _, sha in spec.gz_sha256)
        assert all(m.endswith("/") for m in spec.mirrors)
    assert MNIST.mirrors[0] == "https://ossci-datasets.s3.amazonaws.com/mnist/"


# --- cache directory ------------------------------------------------------------------------


def test_cache_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("TRAINSCALE_CACHE_DIR")
    assert cache.cache_dir() == tmp_path / "xdg" / "trainscale"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "trainscale"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "trainscale"
    assert not (tmp_path / "home").exists()  # asking does not create anything


# --- downloads from a local server ---------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _served_spec(served: Path, *mirrors: str) -> IdxDatasetSpec:
    """MNIST with generated .gz files in ``served/mnist`` and their true digests."""
    make_dataset(served / "mnist", marker=7, gzip=True)
    digests = tuple((name, _sha256(served / "mnist" / f"{name}.gz")) for name in STANDARD_FILES)
    return dataclasses.replace(MNIST, mirrors=mirrors, gz_sha256=digests)


def _files_under(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.is_file())


def test_download_verified_lands_in_cache(env: Path, server: tuple[str, Path]) -> None:
    base, served = server
    # The first mirror answers 404 for everything: the second must be used.
    spec = _served_spec(served, f"{base}nothing-here/", f"{base}mnist/")
    data = load_idx_dataset(spec)
    target = env / "cache" / "mnist"
    assert data.source == str(target)
    assert int(data.train_images[0, 0, 0]) == 7
    assert data.train_images.shape == (NUM_TRAIN, 28, 28)
    assert _files_under(target) == sorted(f"{name}.gz" for name in STANDARD_FILES)
    for name in STANDARD_FILES:
        assert _sha256(target / f"{name}.gz") == _sha256(served / "mnist" / f"{name}.gz")
    # The second call finds the cache and never asks the (now useless) mirrors.
    offline = dataclasses.replace(spec, mirrors=(f"{base}nothing-here/",))
    assert load_idx_dataset(offline).source == str(target)


def test_download_wrong_checksum_leaves_nothing(env: Path, server: tuple[str, Path]) -> None:
    base, served = server
    spec = _served_spec(served, f"{base}mnist/")
    wrong = tuple((name, "0" * 64) for name, _ in spec.gz_sha256)
    spec = dataclasses.replace(spec, gz_sha256=wrong)
    with pytest.raises(DataError) as info:
        load_idx_dataset(spec)
    message = str(info.value)
    url = f"{base}mnist/train-images-idx3-ubyte.gz"
    actual = _sha256(served / "mnist" / "train-images-idx3-ubyte.gz")
    assert "checksum mismatch" in message and url in message
    assert "0" * 64 in message and actual in message
    assert "\n" not in message
    assert _files_under(env / "cache") == []


def test_offline_gives_one_error_with_everything(env: Path, server: tuple[str, Path]) -> None:
    base, served = server
    spec = _served_spec(served, f"{base}a/", f"{base}b/")
    with pytest.raises(DataError) as info:
        load_idx_dataset(spec)
    message = str(info.value)
    for place in candidate_dirs(spec):
        assert _named(message, place, env), place
    # The first mirror's failure, said once: every mirror failing the same way would repeat it.
    assert f"{base}a/train-images-idx3-ubyte.gz" in message
    # Counted without the mirrors' address, whose port may hold those digits (127.0.0.1:34043).
    assert message.replace(base, "").count("404") == 1
    assert "--data-dir" in message
    assert _files_under(env / "cache") == []


def test_download_resumes_after_partial_run(env: Path, server: tuple[str, Path]) -> None:
    base, served = server
    spec = _served_spec(served, f"{base}mnist/")
    target = env / "cache" / "mnist"
    target.mkdir(parents=True)
    kept = target / "train-images-idx3-ubyte.gz"
    kept.write_bytes((served / "mnist" / kept.name).read_bytes())
    os.utime(kept, (0, 0))
    load_idx_dataset(spec)
    assert kept.stat().st_mtime == 0  # not fetched again
    assert len(_files_under(target)) == 4


def test_download_function_checksums(tmp_path: Path, server: tuple[str, Path]) -> None:
    base, served = server
    payload = b"hello trainscale\n" * 1000
    (served / "blob").write_bytes(payload)
    sha = hashlib.sha256(payload).hexdigest()
    dest = tmp_path / "out" / "sub" / "blob"
    assert cache.download(f"{base}blob", dest, sha256=sha) == dest
    assert dest.read_bytes() == payload

    dest2 = tmp_path / "out" / "blob2"
    with pytest.raises(DataError) as info:
        cache.download(f"{base}blob", dest2, sha256="a" * 64)
    assert f"{base}blob" in str(info.value)
    assert "a" * 64 in str(info.value) and sha in str(info.value)
    assert sorted(p.name for p in dest2.parent.iterdir()) == ["sub"]  # no blob2, no .part


def test_download_refused_connection(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dest = tmp_path / "blob"
    with pytest.raises(DataError, match="could not download"):
        cache.download(f"http://127.0.0.1:{port}/blob", dest, timeout_s=5)
    assert list(tmp_path.iterdir()) == []


# --- real data ------------------------------------------------------------------------------


def _real_mnist_dir() -> Path | None:
    root = os.environ.get("TRAINSCALE_DATA_DIR")
    if not root:
        return None
    try:
        return locate(MNIST, root)
    except DataError:
        return None


@pytest.mark.skipif(_real_mnist_dir() is None, reason="TRAINSCALE_DATA_DIR unset or lacks MNIST")
def test_real_mnist_from_env() -> None:
    data = load_idx_dataset(MNIST, download=False)
    assert data.train_images.shape == (MNIST.num_train, 28, 28)
    assert data.test_images.shape == (MNIST.num_test, 28, 28)
    assert data.train_labels.shape == (MNIST.num_train,)
    assert data.test_labels.shape == (MNIST.num_test,)
    for labels in (data.train_labels, data.test_labels):
        assert labels.min() == 0 and labels.max() == 9
        assert len(np.unique(labels)) == 10
    # Digits on a black background: mostly zero pixels, some saturated ones.
    assert data.train_images.max() == 255
    assert 0.7 < float((data.train_images == 0).mean()) < 0.9


@pytest.mark.parametrize(("train", "test", "split"), [(8, 0, "test"), (0, 8, "training")])
def test_an_empty_split_is_refused_in_one_line(tmp_path: Path, train, test, split) -> None:
    from tests.helpers.mnist_files import write_random_mnist

    folder = write_random_mnist(tmp_path / "mnist", train, test)
    with pytest.raises(DataError, match=rf"the {split} split of mnist in .* is empty \(0 images\)"):
        load_idx_dataset(MNIST, folder, download=False)


# --- another dataset under the same names ---------------------------------------------------


def test_another_known_dataset_under_the_same_names_is_refused(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fashion-MNIST ships as four files named as MNIST's: read as MNIST, a run would report
    # its accuracy as MNIST's. Here a generated set stands for it, by its labels' digest.
    root = make_dataset(env / "d")
    labels = load_idx_dataset(MNIST, root, download=False).train_labels
    other = dataclasses.replace(
        FASHION_MNIST, train_labels_sha256=hashlib.sha256(labels.tobytes()).hexdigest()
    )
    monkeypatch.setattr(mnist_module, "IDX_DATASETS", (MNIST, other))
    with pytest.raises(DataError) as info:
        load_idx_dataset(MNIST, root, download=False)
    assert str(info.value) == (
        f"{root} holds fashion-mnist, not mnist (its training labels are fashion-mnist's); "
        "point --data-dir at mnist's files"
    )
    assert load_idx_dataset(other, root, download=False).source == str(root)


REAL = Path(os.environ.get("TRAINSCALE_DATA_DIR", "/nonexistent"))


@pytest.mark.skipif(
    not (REAL / "fashion-mnist").is_dir() or not (REAL / "mnist").is_dir(),
    reason="TRAINSCALE_DATA_DIR lacks mnist and fashion-mnist",
)
def test_the_real_sets_are_told_apart() -> None:
    assert load_idx_dataset(MNIST, REAL / "mnist", download=False).train_labels.size == 60_000
    with pytest.raises(DataError, match="holds fashion-mnist, not mnist"):
        load_idx_dataset(MNIST, REAL / "fashion-mnist", download=False)
    with pytest.raises(DataError, match="holds mnist, not fashion-mnist"):
        load_idx_dataset(FASHION_MNIST, REAL / "mnist", download=False)
