"""IMDB loaders: the aclImdb tree and Keras's imdb.npz (generated in exactly those formats),
the restricted unpickler, the search path, and checksummed downloads from a local server."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from trainscale.data import imdb
from trainscale.data.tensors import DataRequest, DataSize
from trainscale.data.text import PAD_ID, UNK_ID
from trainscale.errors import DataError
from trainscale.workloads import get_workload

from tests.helpers.text_files import (
    REVIEWS,
    TEST_LABELS,
    TRAIN_LABELS,
    exploit_array,
    npy_bytes,
    object_array,
    write_acl_tree,
    write_imdb_npz,
)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolate every place the search looks at; returns the tmp root."""
    for name in ("home", "cache", "cwd"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


# --- the aclImdb tree --------------------------------------------------------------------


def test_acl_tree_loads_with_a_train_only_vocabulary(env: Path) -> None:
    tree = write_acl_tree(env / "d")
    splits = imdb.load_acl_tree(tree, vocab_size=1000, max_len=12, strict_vocab=False)
    # neg (label 0) files first, then pos, each sorted by name
    assert splits.train_labels.tolist() == [0, 0, 1, 1]
    assert splits.test_labels.tolist() == [0, 0, 1, 1]
    assert splits.classes == ["neg", "pos"]
    assert splits.train_ids.shape == (4, 12) and splits.train_ids.dtype == np.int64
    vocab_words = {"a", "wonderful", "film", "great", "acting", "fun", "cast", "awful", "truly",
                   "boring", "and", "dull", "waste", ".", "!", ",", ";"}  # fmt: skip
    assert splits.vocab_size == len(vocab_words) + 2  # train/unsup and test words left out
    # "Unseenword great." : the test-only word is unknown
    unseen_row = splits.test_ids[3]
    assert unseen_row[0] == UNK_ID and unseen_row[2] != UNK_ID
    # "<br />" is gone: "Boring<br />and dull; a waste." has 7 tokens
    assert (splits.train_ids != PAD_ID).sum(axis=1).tolist()[1] == 7


def test_acl_tree_missing_folder_is_the_wrong_format(env: Path) -> None:
    tree = write_acl_tree(env / "d")
    for f in (tree / "test" / "neg").iterdir():
        f.unlink()
    (tree / "test" / "neg").rmdir()
    with pytest.raises(DataError) as info:
        imdb.acl_files(tree)
    assert "not an aclImdb tree (missing test/neg)" in str(info.value)
    # Looked for where it is, the reason reaches the user.
    with pytest.raises(DataError) as info:
        imdb.locate_imdb(env / "d", "auto", download=False)
    assert "not an aclImdb tree (missing test/neg)" in str(info.value)


def test_acl_tree_empty_split(env: Path) -> None:
    tree = write_acl_tree(env / "d")
    for f in (tree / "test" / "pos").iterdir():
        f.unlink()
    with pytest.raises(DataError, match=r"test/pos has no \.txt reviews: the test split is empty"):
        imdb.acl_files(tree)


def test_acl_tree_lists_reviews_in_the_published_numeric_order(env: Path) -> None:
    # Stanford's names are unpadded ids: 9_7.txt was published before 10_8.txt.
    tree = write_acl_tree(env / "d", {f: [] for f in ("train/neg", "test/pos", "test/neg")})
    (tree / "train" / "pos").mkdir(parents=True)
    for name in ("10_8.txt", "9_7.txt", "100_9.txt", "notes.md"):
        (tree / "train" / "pos" / name).write_text("fine")
    for folder in ("train/neg", "test/pos", "test/neg"):
        (tree / folder / "0_1.txt").write_text("fine")
    names = [p.name for p in imdb.acl_files(tree)["train/pos"]]
    assert names == ["9_7.txt", "10_8.txt", "100_9.txt"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(b"", "is empty"), (b"  \n", "is empty"), (b"caf\xe9 film", "cannot be decoded as utf-8")],
)
def test_a_damaged_review_file_is_one_line_naming_it(
    env: Path, content: bytes, fragment: str
) -> None:
    tree = write_acl_tree(env / "d")
    damaged = sorted((tree / "test" / "pos").iterdir())[0]
    damaged.write_bytes(content)
    with pytest.raises(DataError) as info:
        imdb.load_acl_tree(tree, vocab_size=50, max_len=8)
    assert str(damaged) in str(info.value) and fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_asked_only_whether_it_is_here_the_tree_is_counted_not_encoded(env: Path) -> None:
    # `recipes` and a sweep's dry run ask; encoding the real set for them took 10 s.
    tree = write_acl_tree(env / "d")
    workload = get_workload("imdb-bilstm")
    asked = workload.locate_real(DataRequest(data_dir=tree, download=False, prepare=False))
    counts = {s: sum(len(REVIEWS[f"{s}/{p}"]) for p in ("pos", "neg")) for s in ("train", "test")}
    assert asked.size == DataSize(counts["train"], counts["test"])
    assert not list((env / "cache").rglob("*.npz"))
    prepared = workload.locate_real(DataRequest(data_dir=tree, download=False))
    assert prepared == asked
    assert len(list((env / "cache" / "encoded-text").glob("*.npz"))) == 1


# --- imdb.npz --------------------------------------------------------------------------------


@pytest.mark.parametrize("numpy_module", ["numpy.core.multiarray", None], ids=["np1", "np2"])
def test_npz_keras_conventions(env: Path, numpy_module: str | None) -> None:
    path = write_imdb_npz(env / "imdb.npz", numpy_module)
    splits = imdb.load_imdb_npz(path, vocab_size=10, max_len=5)
    # start 1, rank r -> r + 3, ids >= vocab_size -> oov 2, 0-padded, last max_len kept
    assert splits.train_ids.tolist() == [
        [1, 4, 5, 6, 0],
        [1, 7, 4, 0, 0],
        [1, 8, 9, 2, 2],
        [1, 5, 0, 0, 0],
    ]
    assert splits.test_ids.tolist() == [[1, 4, 2, 0, 0], [1, 6, 6, 6, 0]]
    assert splits.train_labels.tolist() == TRAIN_LABELS
    assert splits.test_labels.tolist() == TEST_LABELS
    assert splits.vocab_size == 10 and splits.classes == ["neg", "pos"]
    cut = imdb.load_imdb_npz(path, vocab_size=10, max_len=2)
    assert cut.train_ids[2].tolist() == [2, 2]  # the end of the review is kept


def test_npz_numpy_ints_inside_lists(env: Path) -> None:
    x = object_array([[np.int64(1), np.int64(2)], [3]])
    path = write_imdb_npz(env / "imdb.npz", x_train=x, y_train=np.array([0, 1]))
    assert imdb.load_imdb_npz(path, 10, 4, False).train_ids[0].tolist() == [1, 4, 5, 0]


def test_npz_vocabulary_larger_than_the_data(env: Path) -> None:
    path = write_imdb_npz(env / "imdb.npz")
    with pytest.raises(DataError, match=r"vocab_size 50 is larger than the data.*up to 11"):
        imdb.load_imdb_npz(path, vocab_size=50, max_len=5)
    assert imdb.load_imdb_npz(path, 50, 5, strict_vocab=False).vocab_size == 12


@pytest.mark.parametrize("how", ["system", "exec"])
def test_malicious_npz_is_refused_without_running(env: Path, how: str) -> None:
    marker = env / "pwned"
    hostile = exploit_array(marker, how)
    path = write_imdb_npz(env / "imdb.npz", None, x_train=hostile, y_train=np.array([1]))
    with pytest.raises(DataError) as info:
        imdb.read_imdb_npz(path)
    assert "refusing to load" in str(info.value) and "x_train" in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"y_test": None}, "not a Keras imdb.npz: no y_test"),
        ({"y_train": np.array([0, 1])}, "x_train has shape (4,) and y_train (2,)"),
        ({"y_train": np.array([0, 1, 2, 1])}, "labels must be 0"),
        ({"x_train": np.zeros((4, 3))}, "x_train has shape (4, 3)"),
        ({"x_train": object_array([]), "y_train": np.array([], np.int64)}, "split of"),
        (
            {"x_test": object_array([[1, 9], [3, -5, 3]])},
            "x_test[1] holds the word index -5; word indices are ranks >= 0",
        ),
    ],
)
def test_npz_bad_contents(env: Path, change: dict, fragment: str) -> None:
    path = write_imdb_npz(env / "imdb.npz", **change)
    with pytest.raises(DataError) as info:
        imdb.load_imdb_npz(path, 10, 5)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_npz_not_a_zip_or_damaged(env: Path) -> None:
    bad = env / "imdb.npz"
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(DataError, match="not a readable .npz"):
        imdb.read_imdb_npz(bad)
    with zipfile.ZipFile(bad, "w") as archive:
        for name in imdb.NPZ_MEMBERS:
            archive.writestr(f"{name}.npy", npy_bytes(object_array([[1]]))[:-3])
    with pytest.raises(DataError, match="x_train is not a readable .npy"):
        imdb.read_imdb_npz(bad)


# --- search path -------------------------------------------------------------------------


def test_search_order_and_layouts(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (env / "home" / ".keras" / "datasets").mkdir(parents=True)
    keras = write_imdb_npz(env / "home" / ".keras" / "datasets" / "imdb.npz")
    assert imdb.locate_imdb(None, "auto", download=False) == keras
    cached_tree = write_acl_tree(env / "cache" / "imdb")
    assert imdb.locate_imdb(None, "auto", download=False) == cached_tree
    assert imdb.locate_imdb(None, "npz", download=False) == keras  # npz only: tree skipped
    from_env = env / "envdir"
    from_env.mkdir()
    npz = write_imdb_npz(from_env / "imdb.npz")
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(from_env))
    assert imdb.locate_imdb(None, "auto", download=False) == npz
    assert imdb.locate_imdb(None, "aclimdb", download=False) == cached_tree
    arg_tree = write_acl_tree(env / "arg")
    assert imdb.locate_imdb(env / "arg", "auto", download=False) == arg_tree  # <dir>/aclImdb
    assert imdb.locate_imdb(arg_tree, "auto", download=False) == arg_tree  # the tree itself
    assert imdb.locate_imdb(npz, "auto", download=False) == npz  # a file given directly


def test_not_found_names_every_place(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(env / "envdir"))
    with pytest.raises(DataError) as info:
        imdb.locate_imdb(None, "auto", download=False)
    message = str(info.value)
    assert "\n" not in message and "download disabled" in message
    # Each root once (its imdb/ sub-folder is searched too), short enough to read.
    assert f"TRAINSCALE_DATA_DIR={env / 'envdir'}, {env / 'cache' / 'imdb'}" in message
    assert "./data, ~/data, ~/.keras/datasets" in message
    assert "--data-dir" in message and "-o file=PATH" in message
    assert "--data synthetic" in message


def test_explicit_dir_is_the_only_place(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (env / "cache" / "imdb").mkdir()
    write_imdb_npz(env / "cache" / "imdb" / "imdb.npz")  # would be found without --data-dir
    assert imdb.locate_imdb(None, "auto", download=False) == env / "cache" / "imdb" / "imdb.npz"
    wrong = env / "arg" / "aclImdb"
    (wrong / "train" / "pos").mkdir(parents=True)
    assert imdb.candidate_dirs(env / "arg") == [env / "arg", env / "arg" / "imdb"]
    for data_dir, reason in ((env / "arg", "looked in"), (env / "none", "it does not exist")):
        with pytest.raises(DataError) as info:
            imdb.locate_imdb(data_dir, "auto", download=True)
        message = str(info.value)
        assert message.startswith(f"IMDB not found in {data_dir} (--data-dir): {reason}")
        assert "\n" not in message and "-o file=PATH" in message
        assert "TRAINSCALE_DATA_DIR" in message
    with pytest.raises(DataError, match=r"aclImdb is not an aclImdb tree \(missing train/neg"):
        imdb.locate_imdb(env / "arg", "auto", download=False)
    assert not (env / "cache" / "imdb" / "aclImdb").exists()  # nothing downloaded


def test_published_checksums() -> None:
    # Keras's imdb.load_data pins this SHA-256 for imdb.npz.
    assert imdb.NPZ_SHA256 == "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f"
    assert imdb.ACLIMDB_SHA256 == (
        "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
    )
    assert imdb.NPZ_URL == "https://storage.googleapis.com/tensorflow/tf-keras-datasets/imdb.npz"
    assert imdb.ACLIMDB_URL == "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"


# --- downloads from a local server ---------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_npz_download_verified(env: Path, server, monkeypatch: pytest.MonkeyPatch) -> None:
    base, served = server
    source = write_imdb_npz(served / "imdb.npz")
    monkeypatch.setattr(imdb, "NPZ_URL", f"{base}imdb.npz")
    monkeypatch.setattr(imdb, "NPZ_SHA256", "0" * 64)
    with pytest.raises(DataError, match="checksum mismatch"):
        imdb.locate_imdb(None, "auto", download=True)
    assert not (env / "cache" / "imdb" / "imdb.npz").exists()
    monkeypatch.setattr(imdb, "NPZ_SHA256", _sha256(source))
    got = imdb.locate_imdb(None, "auto", download=True)
    assert got == env / "cache" / "imdb" / "imdb.npz"
    assert imdb.load_imdb_npz(got, 10, 5).train_labels.tolist() == TRAIN_LABELS


def _tarball(tree_root: Path, dest: Path, extra: list[tarfile.TarInfo] | None = None) -> Path:
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(tree_root / "aclImdb", arcname="aclImdb")
        for info in extra or []:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return dest


def test_aclimdb_download_extracts_only_labelled_reviews(
    env: Path, server, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, served = server
    write_acl_tree(env / "src")
    archive = _tarball(env / "src", served / "aclImdb_v1.tar.gz")
    monkeypatch.setattr(imdb, "ACLIMDB_URL", f"{base}aclImdb_v1.tar.gz")
    monkeypatch.setattr(imdb, "ACLIMDB_SHA256", _sha256(archive))
    tree = imdb.locate_imdb(None, "aclimdb", download=True)
    assert tree == env / "cache" / "imdb" / "aclImdb"
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert len(files) == 8 and all(f.endswith(".txt") for f in files)
    assert not (tree / "train" / "unsup").exists()
    assert sorted(p.name for p in tree.parent.iterdir()) == ["aclImdb"]  # archive removed
    assert imdb.load_acl_tree(tree, 1000, 10, strict_vocab=False).train_labels.tolist() == [
        0, 0, 1, 1,
    ]  # fmt: skip


@pytest.mark.parametrize("kind", ["symlink", "dotdot"])
def test_hostile_archive_is_refused(env: Path, kind: str) -> None:
    write_acl_tree(env / "src")
    if kind == "symlink":
        info = tarfile.TarInfo("aclImdb/train/pos/evil.txt")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    else:
        info = tarfile.TarInfo("aclImdb/train/pos/../../../../evil.txt")
        info.size = 1
    target = env / "cache" / "imdb"
    target.mkdir(parents=True)
    archive = _tarball(env / "src", target / "a.tar.gz", [info])
    if kind == "symlink":
        with pytest.raises(DataError, match="not a plain file"):
            imdb.extract_aclimdb(archive, target)
    else:  # not a review path: never extracted
        imdb.extract_aclimdb(archive, target)
    assert not (target / "aclImdb" / "train" / "pos" / "evil.txt").exists()
    assert not any(p.name == "evil.txt" for p in env.rglob("evil.txt"))
