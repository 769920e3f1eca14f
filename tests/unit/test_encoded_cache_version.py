"""The encoded-text cache serves an entry only while encoding is unchanged: its key holds
`FORMAT_VERSION`, and this test pins what the encoders make of small files in every format.
A change in tokenizing, parsing or encoding changes the digest below; then bump
`FORMAT_VERSION` (data/encoded_cache.py) and record the new digest, or a user's cache keeps
serving what the old code made of their files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from trainscale.data import imdb
from trainscale.data.encoded_cache import FORMAT_VERSION
from trainscale.data.text import EncodedSplits, TableSpec, load_table_splits

from tests.helpers.text_files import write_acl_tree, write_imdb_npz

DIGESTS = {2: "71d5af7c999c22339a736fa0d13040520e2e92afdb22ee26fd26af3235b0921f"}
"""FORMAT_VERSION -> the digest of the fixtures' encodings under it."""

TRAIN_TSV = (
    "label\ttext\n"
    'pos\t"quoted" start, then words\n'  # a TSV's quotes are text
    "neg\tplain words <br /> and a tag\n"
    'neu\tÜnïcode wörds, commas, "quotes"\n'
    "pos\tmore words words words\n"
)
TEST_TSV = "label\ttext\nneg\tunseen words here\npos\tquoted words\n"
TRAIN_CSV = '\ufefflabel,text\n0,"a, quoted, field"\n1,second row\n1,"third ""row"""\n'
TEST_CSV = "label,text\n0,a row\n1,another\n"


def _digest(splits: EncodedSplits, digest: hashlib._Hash) -> None:
    for array in (splits.train_ids, splits.train_labels, splits.test_ids, splits.test_labels):
        digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
    digest.update(repr((splits.vocab_size, list(splits.classes), splits.max_len)).encode())


def test_the_encodings_are_those_of_this_format_version(tmp_path: Path) -> None:
    contents = {
        "train.tsv": TRAIN_TSV,
        "test.tsv": TEST_TSV,
        "train.csv": TRAIN_CSV,
        "test.csv": TEST_CSV,
    }
    files = {name: tmp_path / name for name in contents}
    for name, text in contents.items():
        files[name].write_text(text, encoding="utf-8")
    digest = hashlib.sha256()
    for train, test in (("train.tsv", "test.tsv"), ("train.csv", "test.csv")):
        splits = load_table_splits(files[train], TableSpec(), files[test], 0.2, 50, 6, False)
        _digest(splits, digest)
    _digest(imdb.load_acl_tree(write_acl_tree(tmp_path), 50, 6, False), digest)
    _digest(imdb.load_imdb_npz(write_imdb_npz(tmp_path / "imdb.npz"), 50, 6, False), digest)
    assert FORMAT_VERSION in DIGESTS, f"record the digest of FORMAT_VERSION {FORMAT_VERSION}"
    assert digest.hexdigest() == DIGESTS[FORMAT_VERSION], (
        "the encoders' output changed: bump FORMAT_VERSION in data/encoded_cache.py and record "
        f"the new digest {digest.hexdigest()} for it here"
    )
