"""CIFAR-10 data layer: both release formats, restricted unpickling, one-line errors, search
order, verified download and safe extraction, and the batched crop-and-flip augmentation.

HOME, the cache, the data-dir variable and the working directory point into tmp_path, and
downloads come from a local http.server: nothing touches the real home or the internet.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from trainscale.data import cifar
from trainscale.data.augment import random_crop_flip
from trainscale.data.cifar import (
    ARCHIVE_SHA256,
    ARCHIVE_URL,
    BIN_FOLDER,
    PY_FOLDER,
    candidate_dirs,
    load_cifar10,
    locate,
    read_binary_batch,
    read_python_batch,
)
from trainscale.errors import DataError

from tests.helpers.cifar_files import NAMES, batch_dict, py2_pickle, write_binary, write_python

PER_BATCH = 4


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


def one_line_error(call, *fragments: str) -> str:
    with pytest.raises(DataError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


# --- both formats ----------------------------------------------------------------------------


@pytest.mark.parametrize("writer", ["py2", "py2-numpy2", "py3"])
def test_python_and_binary_load_the_same_arrays(env: Path, writer: str) -> None:
    batches = write_python(env / "py", PER_BATCH, writer=writer)
    write_binary(env / "bin", PER_BATCH)
    from_py = load_cifar10(env / "py", download=False)
    from_bin = load_cifar10(env / "bin", download=False)
    assert (from_py.format, from_bin.format) == ("python", "binary")
    assert from_py.train_images.shape == (5 * PER_BATCH, 3, 32, 32)
    assert from_py.test_images.shape == (PER_BATCH, 3, 32, 32)
    assert from_py.train_images.dtype == np.uint8 and from_py.train_labels.dtype == np.int64
    for field in ("train_images", "train_labels", "test_images", "test_labels"):
        np.testing.assert_array_equal(getattr(from_py, field), getattr(from_bin, field))
    # Rows are CHW images, training batches in order 1..5, then the test batch.
    expected = np.concatenate([images for images, _ in batches[:5]]).reshape(-1, 3, 32, 32)
    np.testing.assert_array_equal(from_py.train_images, expected)
    assert from_py.train_images[PER_BATCH * 2, 0, 0, 0] == 2
    assert from_py.test_images[0, 0, 0, 0] == 5
    assert list(from_py.test_labels) == batches[5][1]


def test_generated_pickle_matches_the_release_layout() -> None:
    # The opcodes Python 2 wrote: a protocol-2 header, BINSTRING keys, numpy 1 globals.
    raw = py2_pickle(batch_dict(np.zeros((1, 3072), np.uint8), [0], "x"))
    assert raw.startswith(b"\x80\x02}")
    assert b"U\x04data" in raw and b"cnumpy.core.multiarray\n_reconstruct\n" in raw
    assert b"_codecs" not in raw


# --- restricted unpickling ------------------------------------------------------------------


class _Evil:
    def __init__(self, call, *args) -> None:
        self.call, self.args = call, args

    def __reduce__(self):
        return self.call, self.args


def _evil_payloads(marker: Path) -> dict[str, bytes]:
    command = f"touch {marker}"
    return {
        # os.system pickles as posix.system: the classic shell-command payload.
        "os.system": pickle.dumps(_Evil(os.system, command), protocol=2),
        "eval": pickle.dumps(_Evil(eval, f"open({str(marker)!r}, 'w').close()"), protocol=2),
        # Hidden inside an otherwise well-formed batch, as a label list.
        "nested": pickle.dumps(
            {b"data": np.zeros((1, 3072), np.uint8), b"labels": _Evil(os.system, command)},
            protocol=2,
        ),
        # numpy, but not array reconstruction.
        "numpy.load": pickle.dumps(_Evil(np.load, str(marker)), protocol=2),
    }


@pytest.mark.parametrize("kind", ["os.system", "eval", "nested", "numpy.load"])
def test_malicious_pickle_is_refused_and_never_runs(env: Path, kind: str) -> None:
    marker = env / "pwned"
    directory = env / "d"
    write_python(directory, PER_BATCH)
    bad = directory / "data_batch_3"
    bad.write_bytes(_evil_payloads(marker)[kind])
    one_line_error(lambda: read_python_batch(bad), str(bad), "refusing to unpickle")
    one_line_error(lambda: load_cifar10(directory, download=False), str(bad), "refusing")
    assert not marker.exists()


def test_the_payload_would_run_under_plain_pickle(env: Path) -> None:
    # Shows the test above is meaningful: the same bytes do run code with pickle.loads.
    marker = env / "pwned"
    pickle.loads(_evil_payloads(marker)["os.system"])
    assert marker.exists()


# --- one-line errors that name the file -----------------------------------------------------


def test_truncated_binary_file(env: Path) -> None:
    directory = env / BIN_FOLDER
    write_binary(directory, PER_BATCH)
    bad = directory / "data_batch_2.bin"
    bad.write_bytes(bad.read_bytes()[:-100])
    one_line_error(lambda: load_cifar10(env, download=False), str(bad), "3073-byte records")


def test_binary_file_cut_at_a_record_boundary(env: Path) -> None:
    write_binary(env / "d", PER_BATCH)
    bad = env / "d" / "test_batch.bin"
    bad.write_bytes(bad.read_bytes()[: 3073 * (PER_BATCH - 1)])
    one_line_error(
        lambda: load_cifar10(env / "d", download=False),
        str(bad),
        f"holds {PER_BATCH - 1} images",
        "data_batch_1.bin holds 4",
    )


def test_truncated_pickle(env: Path) -> None:
    write_python(env / "d", PER_BATCH)
    bad = env / "d" / "test_batch"
    bad.write_bytes(bad.read_bytes()[:500])
    one_line_error(lambda: load_cifar10(env / "d", download=False), str(bad), "not a readable")


def _write_entry(path: Path, entry: dict) -> Path:
    path.write_bytes(py2_pickle(entry))
    return path


def test_wrong_keys(env: Path) -> None:
    write_python(env / "d", PER_BATCH)
    entry = batch_dict(np.zeros((2, 3072), np.uint8), [0, 1], "x")
    entry[b"fine_labels"] = entry.pop(b"labels")  # a CIFAR-100 file
    bad = _write_entry(env / "d" / "data_batch_1", entry)
    one_line_error(lambda: load_cifar10(env / "d", download=False), str(bad), "fine_labels")


def test_not_a_dict(env: Path) -> None:
    bad = env / "list"
    bad.write_bytes(py2_pickle([1, 2, 3]))
    one_line_error(lambda: read_python_batch(bad), str(bad), "holds a list")


@pytest.mark.parametrize(
    ("data", "labels", "fragment"),
    [
        (np.zeros((2, 1024), np.uint8), [0, 1], "shape (2, 1024)"),
        (np.zeros((2, 3072), np.float32), [0, 1], "float32"),
        (np.zeros((2, 3072), np.uint8), [0, 1, 2], "2 images but 3 labels"),
        (np.zeros((2, 3072), np.uint8), [b"cat", b"dog"], "flat list of ints"),
        (np.zeros((2, 3072), np.uint8), [[1], [1, 2]], "flat list of ints"),
        (np.zeros((2, 3072), np.uint8), "0 1", "labels is a bytes"),
        (np.zeros((0, 3072), np.uint8), [], "holds no images"),
        (np.zeros((2, 3072), np.uint8), [0, 10], "label 10 is out of range"),
        (np.zeros((2, 3072), np.uint8), [-1, 0], "label -1 is out of range"),
    ],
)
def test_bad_python_batch(env: Path, data, labels, fragment: str) -> None:
    bad = _write_entry(env / "batch", batch_dict(data, labels, "x"))
    one_line_error(lambda: read_python_batch(bad), str(bad), fragment)


@pytest.mark.parametrize("fmt", ["python", "binary"])
def test_label_out_of_range_in_a_set(env: Path, fmt: str) -> None:
    writer = write_python if fmt == "python" else write_binary
    writer(env / "d", PER_BATCH, max_label=10)
    name = "data_batch_1" + ("" if fmt == "python" else ".bin")
    one_line_error(
        lambda: load_cifar10(env / "d", download=False), str(env / "d" / name), "label 10"
    )


def test_empty_binary_file(env: Path) -> None:
    write_binary(env / "d", PER_BATCH)
    bad = env / "d" / "data_batch_4.bin"
    bad.write_bytes(b"")
    one_line_error(lambda: read_binary_batch(bad), str(bad), "0 bytes")


def test_count_mismatch_between_python_batches(env: Path) -> None:
    write_python(env / "d", PER_BATCH)
    bad = _write_entry(
        env / "d" / "data_batch_5", batch_dict(np.zeros((3, 3072), np.uint8), [0, 1, 2], "x")
    )
    one_line_error(lambda: load_cifar10(env / "d", download=False), str(bad), "holds 3 images")


# --- search order ---------------------------------------------------------------------------


def test_data_dir_beats_env_beats_cache(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arg = env / "arg"
    write_python(arg, PER_BATCH, seed=1)
    write_python(env / "envdir" / PY_FOLDER, PER_BATCH, seed=2)
    write_binary(env / "cache" / "cifar10" / BIN_FOLDER, PER_BATCH, seed=3)
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(env / "envdir"))
    assert locate(arg) == (arg, "python")
    assert locate() == (env / "envdir" / PY_FOLDER, "python")
    assert load_cifar10(download=False).source == str(env / "envdir" / PY_FOLDER)
    monkeypatch.delenv("TRAINSCALE_DATA_DIR")
    assert locate() == (env / "cache" / "cifar10" / BIN_FOLDER, "binary")
    # A data_dir without the files is refused: it never falls through to the cache's set.
    (env / "empty").mkdir()
    for call in (lambda: locate(env / "empty"), lambda: load_cifar10(env / "empty")):
        one_line_error(call, f"cifar10 not found in {env / 'empty'} (--data-dir)", PY_FOLDER)
    one_line_error(lambda: load_cifar10(env / "missing"), "it does not exist")


@pytest.mark.parametrize(
    "where",
    [
        f"cwd/data/{PY_FOLDER}",
        f"home/data/{BIN_FOLDER}",
        f"home/.cache/torchvision/{PY_FOLDER}",
        f"home/.keras/datasets/{PY_FOLDER}",
        # Keras 3 (keras/src/utils/file_utils.py) extracts into a "-target" folder.
        f"home/.keras/datasets/{PY_FOLDER}-target/{PY_FOLDER}",
    ],
)
def test_other_tools_places(env: Path, where: str) -> None:
    writer = write_binary if BIN_FOLDER in where else write_python
    writer(env / where, PER_BATCH)
    assert locate()[0].resolve() == (env / where).resolve()


def test_cache_beats_other_tools(env: Path) -> None:
    write_python(env / "home" / ".cache" / "torchvision" / PY_FOLDER, PER_BATCH)
    write_python(env / "cache" / "cifar10" / PY_FOLDER, PER_BATCH)
    assert locate()[0] == env / "cache" / "cifar10" / PY_FOLDER


def test_missing_files_name_every_place(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(env / "envdir"))
    partial = env / "envdir" / PY_FOLDER
    write_python(partial, PER_BATCH)
    (partial / "test_batch").unlink()
    places = candidate_dirs()
    assert places[:6] == [
        env / "envdir",
        env / "envdir" / PY_FOLDER,
        env / "envdir" / BIN_FOLDER,
        env / "cache" / "cifar10",
        env / "cache" / "cifar10" / PY_FOLDER,
        env / "cache" / "cifar10" / BIN_FOLDER,
    ]
    assert env / "home" / ".cache" / "torchvision" / PY_FOLDER in places
    for call in (lambda: locate(), lambda: load_cifar10(download=False)):
        message = one_line_error(
            call,
            "cifar10 not found",
            "has 5 of 6 python batch files, missing test_batch",
            "--data-dir",
            "TRAINSCALE_DATA_DIR",
            str(env / "cache" / "cifar10"),
            "--data synthetic",
        )
        # Each root once (its release sub-folders are searched too); the near miss in full.
        assert f"TRAINSCALE_DATA_DIR={env / 'envdir'}, {env / 'cache' / 'cifar10'}" in message
        assert "./data, ~/data, ~/.cache/torchvision, ~/.keras/datasets" in message
        assert f"{partial} (has 5 of 6" in message


def test_explicit_dir_is_the_only_place(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_python(env / "envdir" / PY_FOLDER, PER_BATCH)
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(env / "envdir"))
    partial = env / "arg" / PY_FOLDER
    write_python(partial, PER_BATCH)
    (partial / "test_batch").unlink()
    places = candidate_dirs(env / "arg")
    assert places == [env / "arg", env / "arg" / PY_FOLDER, env / "arg" / BIN_FOLDER]
    for call in (lambda: locate(env / "arg"), lambda: load_cifar10(env / "arg", download=False)):
        message = one_line_error(
            call,
            f"cifar10 not found in {env / 'arg'} (--data-dir)",
            "has 5 of 6 python batch files, missing test_batch",
            "--data-dir",
            "TRAINSCALE_DATA_DIR and the cache",
            "--data synthetic",
        )
        for place in places:
            assert str(place) in message
        assert str(env / "envdir") not in message


# --- verified download and safe extraction -----------------------------------------------------


def _add_bytes(tar: tarfile.TarFile, name: str, payload: bytes, **info) -> None:
    member = tarfile.TarInfo(name)
    member.size = len(payload)
    for key, value in info.items():
        setattr(member, key, value)
    tar.addfile(member, io.BytesIO(payload))


def _release_archive(path: Path, source: Path, extra: list[tarfile.TarInfo] | None = None) -> str:
    """A tar.gz laid out like the release; returns its SHA-256."""
    with tarfile.open(path, "w:gz") as tar:
        for name in NAMES:
            tar.add(source / name, arcname=f"{PY_FOLDER}/{name}")
        for member in extra or []:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_download_extracts_into_the_cache(env: Path, server: tuple[str, Path]) -> None:
    base, served = server
    write_python(env / "src", PER_BATCH, seed=7)
    sha = _release_archive(served / "cifar-10-python.tar.gz", env / "src")
    data = load_cifar10(url=f"{base}cifar-10-python.tar.gz", sha256=sha)
    target = env / "cache" / "cifar10" / PY_FOLDER
    assert data.source == str(target) and data.format == "python"
    assert sorted(p.name for p in target.iterdir()) == sorted(NAMES)
    # Only the batches stay: no archive, no temporary folder.
    assert sorted(p.name for p in target.parent.iterdir()) == [PY_FOLDER]
    assert data.train_images.shape == (5 * PER_BATCH, 3, 32, 32)
    # Found in the cache next time, without asking the (now unreachable) server.
    assert load_cifar10(url=f"{base}nothing-here", sha256=sha).source == str(target)


def test_archive_fetched_by_hand_is_checked_and_used(env: Path) -> None:
    write_python(env / "src", PER_BATCH)
    target = env / "cache" / "cifar10"
    target.mkdir(parents=True)
    archive = target / "cifar-10-python.tar.gz"
    sha = _release_archive(archive, env / "src")
    offline = "http://127.0.0.1:9/unreachable.tar.gz"
    one_line_error(lambda: load_cifar10(url=offline, sha256="f" * 64), str(archive), "f" * 64)
    data = load_cifar10(url=offline, sha256=sha)
    assert data.source == str(target / PY_FOLDER) and not archive.exists()


def test_download_wrong_checksum_leaves_nothing(env: Path, server: tuple[str, Path]) -> None:
    base, served = server
    write_python(env / "src", PER_BATCH)
    _release_archive(served / "a.tar.gz", env / "src")
    one_line_error(
        lambda: load_cifar10(url=f"{base}a.tar.gz", sha256="0" * 64),
        "checksum mismatch",
        "0" * 64,
        "cifar10 not found",
    )
    assert [p for p in (env / "cache").rglob("*") if p.is_file()] == []


def test_download_disabled_or_offline(env: Path, server: tuple[str, Path]) -> None:
    base, _ = server
    one_line_error(lambda: load_cifar10(download=False), "download disabled")
    message = one_line_error(lambda: load_cifar10(url=f"{base}missing.tar.gz"), "404", "--data-dir")
    assert f"{base}missing.tar.gz" in message


@pytest.mark.parametrize(
    "member",
    [
        {"name": "../escaped", "type": tarfile.REGTYPE},
        {"name": "/tmp/absolute-escape", "type": tarfile.REGTYPE},
        {"name": f"{PY_FOLDER}/link", "type": tarfile.SYMTYPE, "linkname": "/etc/passwd"},
    ],
    ids=["dotdot", "absolute", "symlink"],
)
def test_unsafe_archive_is_refused(env: Path, server: tuple[str, Path], member: dict) -> None:
    base, served = server
    write_python(env / "src", PER_BATCH)
    info = tarfile.TarInfo(member["name"])
    info.type = member["type"]
    info.linkname = member.get("linkname", "")
    info.size = 3 if info.type == tarfile.REGTYPE else 0
    sha = _release_archive(served / "evil.tar.gz", env / "src", [info])
    one_line_error(
        lambda: load_cifar10(url=f"{base}evil.tar.gz", sha256=sha), "refusing to extract"
    )
    assert not (env / "cache" / "escaped").exists()
    assert not (env / "cache" / "cifar10" / PY_FOLDER).exists()


def test_canonical_archive_and_digest() -> None:
    # keras/src/datasets/cifar10.py: the origin and get_file(file_hash=...).
    assert ARCHIVE_URL == "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    assert ARCHIVE_SHA256 == "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
    assert cifar.CANONICAL_BATCH_SIZE * 5 == 50_000


# --- batched augmentation -----------------------------------------------------------------------


def _images(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("channels_last", [False, True])
def test_augment_keeps_shape_dtype_format_and_input(channels_last: bool) -> None:
    x = _images(16)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    before = x.clone()
    out = random_crop_flip(x, torch.Generator().manual_seed(0))
    assert out.shape == x.shape and out.dtype == x.dtype
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    assert out.is_contiguous(memory_format=fmt)
    assert torch.equal(x, before)


def test_crops_are_windows_of_the_padded_image() -> None:
    x = _images(32)
    out = random_crop_flip(x, torch.Generator().manual_seed(1))
    padded = torch.nn.functional.pad(x, (4, 4, 4, 4))
    seen_offsets, seen_flips = set(), set()
    for i in range(len(x)):
        matches = [
            (dy, dx, flip)
            for dy in range(9)
            for dx in range(9)
            for flip in (False, True)
            if torch.equal(
                out[i],
                padded[i, :, dy : dy + 32, dx : dx + 32].flip(-1)
                if flip
                else padded[i, :, dy : dy + 32, dx : dx + 32],
            )
        ]
        assert len(matches) == 1, f"sample {i}: {matches}"
        seen_offsets.add(matches[0][:2])
        seen_flips.add(matches[0][2])
    assert len(seen_offsets) > 10 and seen_flips == {False, True}


def test_flips_at_about_half_rate() -> None:
    # Columns numbered 1..32: a flipped crop reads them right to left. Columns 10 and 20 of
    # the output come from inside the image for every offset.
    x = torch.arange(1.0, 33.0).expand(4000, 3, 32, 32).contiguous()
    out = random_crop_flip(x, torch.Generator().manual_seed(2))
    flipped = (out[:, 0, 16, 10] > out[:, 0, 16, 20]).float().mean().item()
    assert 0.45 < flipped < 0.55


def test_augment_is_deterministic_per_generator() -> None:
    x = _images(64)
    first = random_crop_flip(x, torch.Generator().manual_seed(3))
    again = random_crop_flip(x, torch.Generator().manual_seed(3))
    other = random_crop_flip(x, torch.Generator().manual_seed(4))
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_augment_is_batched_not_a_loop_over_samples() -> None:
    # The same number of torch calls for 2 samples as for 256: no per-sample Python loop.
    class CountCalls(torch.overrides.TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.calls += 1
            return func(*args, **(kwargs or {}))

    counts = []
    for n in (2, 256):
        with CountCalls() as counter:
            random_crop_flip(_images(n), torch.Generator().manual_seed(0))
        counts.append(counter.calls)
    assert counts[0] == counts[1] < 40
