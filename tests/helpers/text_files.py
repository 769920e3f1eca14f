"""Small IMDB files in exactly the release formats, for tests.

- `write_acl_tree`: the folder tree of aclImdb_v1.tar.gz (train/test x pos/neg, one review
  per `<id>_<rating>.txt`, with `<br />` tags), plus the parts a loader must ignore
  (train/unsup, labeledBow.feat, urls_*.txt, imdb.vocab).
- `write_imdb_npz`: Keras's imdb.npz as numpy writes it: `np.savez` of object arrays of int
  lists (word ranks, 1 = most frequent) and int64 labels; `numpy_module` rewrites the
  pickled global to the name numpy 1.x used, as in the published file.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np

REVIEWS = {
    "train/pos": ["A wonderful film.<br /><br />Great acting!", "Great fun, great cast."],
    "train/neg": ["Awful. Truly awful.", "Boring<br />and dull; a waste."],
    "test/pos": ["Great film, wonderful!", "Unseenword great."],
    "test/neg": ["Dull and boring.", "Awful waste of time."],
}


def write_acl_tree(root: Path, reviews: dict[str, list[str]] | None = None) -> Path:
    """An aclImdb tree under `root/aclImdb`; returns it."""
    tree = root / "aclImdb"
    for folder, texts in (reviews or REVIEWS).items():
        (tree / folder).mkdir(parents=True, exist_ok=True)
        for i, text in enumerate(texts):
            rating = 8 if folder.endswith("pos") else 2
            (tree / folder / f"{i}_{rating}.txt").write_text(text, encoding="utf-8")
    (tree / "train" / "unsup").mkdir(parents=True, exist_ok=True)
    (tree / "train" / "unsup" / "0_0.txt").write_text("unsupervisedonly words", encoding="utf-8")
    (tree / "train" / "labeledBow.feat").write_text("0:1 1:2\n")
    (tree / "train" / "urls_pos.txt").write_text("http://www.imdb.com/title/tt0/usercomments\n")
    (tree / "imdb.vocab").write_text("the\nand\n")
    return tree


def object_array(lists: list[list[int]]) -> np.ndarray:
    """A 1-D object array whose elements are the given Python lists (as in Keras's file)."""
    array = np.empty(len(lists), dtype=object)
    for i, seq in enumerate(lists):
        array[i] = list(seq)
    return array


TRAIN_RANKS = [[1, 2, 3], [4, 1], [5, 6, 7, 8], [2]]
TRAIN_LABELS = [1, 0, 1, 0]
TEST_RANKS = [[1, 9], [3, 3, 3]]
TEST_LABELS = [0, 1]


def npy_bytes(array: np.ndarray, numpy_module: str | None = None) -> bytes:
    """One .npy member. Object arrays as numpy 1.x saved them when `numpy_module` is given
    (a protocol-3 pickle naming `numpy_module`), else as this numpy saves them."""
    out = io.BytesIO()
    if numpy_module is None or not array.dtype.hasobject:
        np.save(out, array)
        return out.getvalue()
    np.lib.format.write_array_header_1_0(out, np.lib.format.header_data_from_array_1_0(array))
    # Protocol 3 names globals in plain text (GLOBAL opcode), so renaming is a byte swap.
    raw = pickle.dumps(array, protocol=3)
    out.write(raw.replace(b"numpy._core.multiarray", numpy_module.encode()))
    return out.getvalue()


def write_imdb_npz(
    path: Path,
    numpy_module: str | None = "numpy.core.multiarray",
    **arrays: np.ndarray | None,
) -> Path:
    """An imdb.npz; `arrays` override members, or leave them out when None."""
    members: dict[str, np.ndarray | None] = {
        "x_train": object_array(TRAIN_RANKS),
        "y_train": np.array(TRAIN_LABELS, dtype=np.int64),
        "x_test": object_array(TEST_RANKS),
        "y_test": np.array(TEST_LABELS, dtype=np.int64),
    }
    members.update(arrays)
    if numpy_module is None:
        np.savez(path, **{k: v for k, v in members.items() if v is not None})
        return path
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in members.items():
            if array is not None:
                archive.writestr(f"{name}.npy", npy_bytes(array, numpy_module))
    return path


class Exploit:
    """Pickles as a call that creates `marker`: what a hostile .npz would hold. `how` is
    'system' (os.system) or 'exec' (builtins.exec)."""

    def __init__(self, marker: Path, how: str = "system") -> None:
        self.marker = marker
        self.how = how

    def __reduce__(self):
        if self.how == "exec":
            return (exec, (f"open({str(self.marker)!r}, 'w').close()",))
        return (os.system, (f"touch {self.marker}",))


def exploit_array(marker: Path, how: str = "system") -> np.ndarray:
    """An object array whose pickle, if loaded naively, would create `marker`."""
    array = object_array([[1]])
    array[0] = Exploit(marker, how)
    return array
