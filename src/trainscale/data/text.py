"""Text classification data: tokenizer, vocabulary, fixed-length encoding, delimited files.

numpy only (no torch), so importing this is cheap; tensors are the workload's business.

Conventions shared by every text workload:

- token id 0 is padding and 1 is "unknown" (`PAD_ID`, `UNK_ID`); real tokens start at 2;
- the vocabulary is built on the training split only, so the test split never leaks into it;
- a text becomes a row of a (N, max_len) int64 matrix, padded with 0 at the end; a text
  longer than max_len keeps its last max_len tokens (the end of a review tends to carry
  its verdict; Keras's `pad_sequences` truncates the same way by default).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainscale.errors import DataError
from trainscale.hardware.resources import check_memory

PAD_ID = 0
UNK_ID = 1
RESERVED = ("<pad>", "<unk>")

_HTML_TAG = re.compile(r"<[^>]{0,200}>")
# Words (letters and digits, with inner apostrophes as in "don't") or single punctuation
# marks; "_" is punctuation here because \w would otherwise glue it into words.
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*|[^\w\s]|_")

# Fixed, not the run's seed: every run of a workload must test on the same held-out rows.
SPLIT_SEED = 0


def tokenize(text: str) -> list[str]:
    """Lower-case, drop HTML tags (IMDB reviews contain `<br />`), split into words and
    punctuation marks."""
    return _TOKEN.findall(_HTML_TAG.sub(" ", text.lower()))


@dataclass(frozen=True)
class Vocabulary:
    """Token strings by id; ids 0 and 1 are padding and unknown."""

    itos: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.itos)

    def stoi(self) -> dict[str, int]:
        return {token: i for i, token in enumerate(self.itos)}


def build_vocabulary(
    token_lists: Iterable[Sequence[str]],
    vocab_size: int,
    source: str = "the data",
    strict: bool = True,
) -> Vocabulary:
    """The `vocab_size` most frequent tokens (reserved ids included), ties broken by the
    token string so the result never depends on dict or file order.

    With `strict`, a `vocab_size` the data cannot fill raises DataError (an embedding row no
    token ever uses only costs memory and misleads); without it (a default, not a user's
    explicit choice) the vocabulary is simply every token.
    """
    counts = Counter(token for tokens in token_lists for token in tokens)
    available = len(counts) + len(RESERVED)
    if not strict:
        vocab_size = min(vocab_size, available)
    if vocab_size > available:
        raise DataError(
            f"vocab_size {vocab_size} is larger than the data: the training split of {source} "
            f"has {len(counts)} distinct tokens ({available} with pad and unk); "
            f"use -o vocab_size={available} or less"
        )
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return Vocabulary(RESERVED + tuple(t for t, _ in ranked[: vocab_size - len(RESERVED)]))


def encode(
    token_lists: Sequence[Sequence[str]], vocabulary: Vocabulary, max_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, lengths): ids is (N, max_len) int64 padded with 0, lengths is (N,) int64.

    Out-of-vocabulary tokens become UNK_ID. An empty text becomes a single UNK_ID, so every
    row has at least one real position (an RNN cannot run over zero steps).
    """
    stoi = vocabulary.stoi()
    return encode_ids([[stoi.get(t, UNK_ID) for t in tokens] for tokens in token_lists], max_len)


def encode_ids(id_lists: Sequence[Sequence[int]], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad or cut lists of ids to (N, max_len) int64, keeping the last max_len ids.

    ConfigError (one line) when the matrix would not fit in the memory available: the rows
    are padded to max_len, so a large -o max_len costs N x max_len x 8 bytes whatever the
    texts' lengths.
    """
    check_memory(
        len(id_lists) * max_len * np.dtype(np.int64).itemsize,
        f"encoding {len(id_lists):,} texts padded to -o max_len={max_len}",
        "use a smaller -o max_len",
    )
    ids = np.zeros((len(id_lists), max_len), dtype=np.int64)
    lengths = np.zeros(len(id_lists), dtype=np.int64)
    for row, seq in enumerate(id_lists):
        seq = list(seq[-max_len:]) if len(seq) else [UNK_ID]
        ids[row, : len(seq)] = seq
        lengths[row] = len(seq)
    return ids, lengths


# --- delimited files ---------------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    """How to read a delimited text-classification file."""

    text_column: str = "text"
    """Column name (with a header) or 0-based index."""
    label_column: str = "label"
    """Column name (with a header) or 0-based index."""
    header: bool = True
    delimiter: str = "auto"
    """'auto' (tab for .tsv/.tab, else comma), or the delimiter itself ('\\t' allowed)."""
    encoding: str = "utf-8"
    label_threshold: float | None = None
    """None: labels are category names. A number t: labels are scores, class 1 if > t."""


@dataclass(frozen=True)
class LabelledTexts:
    """Texts and their labels as read from a file, before tokenization."""

    texts: list[str]
    labels: list[str]
    """Raw label strings (category names or scores)."""
    source: str


def resolve_delimiter(path: Path, delimiter: str) -> str:
    """The one-character delimiter for `path` given 'auto', 'tab', '\\t', or a character."""
    if delimiter == "auto":
        return "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    if delimiter in ("tab", "\\t"):
        return "\t"
    return delimiter


def _column_index(spec_value: str, header: list[str] | None, path: Path, role: str) -> int:
    if spec_value.isdigit():
        return int(spec_value)
    if header is None:
        raise DataError(
            f"{path}: {role} column {spec_value!r} is a name but the file is read without a "
            "header; give a 0-based index or -o header=true"
        )
    if spec_value not in header:
        shown = ", ".join(repr(h) for h in header[:10])
        raise DataError(
            f"{path} has no column {spec_value!r} (the {role} column); its header has: {shown}"
            " (wrong -o delimiter or column name?)"
        )
    return header.index(spec_value)


def _numbered_rows(handle: Iterable[str], delimiter: str) -> list[tuple[int, list[str]]]:
    """(the file line each row starts on, the row): a quoted field may span lines in a CSV.
    A TSV is raw text between tabs: a quote is part of the text (a tweet that opens with
    `"` would otherwise swallow the rows after it)."""
    if delimiter == "\t":
        reader = csv.reader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    else:
        reader = csv.reader(handle, delimiter=delimiter)
    rows = []
    start = 1
    for row in reader:
        rows.append((start, row))
        start = reader.line_num + 1
    return rows


def _undecodable(path: Path, encoding: str, error: UnicodeDecodeError) -> tuple[int, int]:
    """(offset in the file, value) of the first byte `encoding` cannot decode; the error's
    own where the file cannot be read again."""
    try:
        path.read_bytes().decode(encoding)
    except UnicodeDecodeError as whole:
        return whole.start, whole.object[whole.start]
    except OSError:
        pass
    return error.start, error.object[error.start]


def read_table(path: Path, spec: TableSpec) -> LabelledTexts:
    """Read the text and label columns of a CSV/TSV file, with one-line DataErrors for a
    missing file, an undecodable byte, a missing column, a row without a label (naming its
    line) or a file without rows. Blank lines are skipped; any other malformed row stops the
    read, so a class is never made from a damaged row."""
    delimiter = resolve_delimiter(path, spec.delimiter)
    if len(delimiter) != 1:
        raise DataError(f"delimiter {spec.delimiter!r} must be one character (or 'auto', 'tab')")
    # UTF-8 files saved by spreadsheets start with a byte-order mark: not part of the header.
    encoding = "utf-8-sig" if spec.encoding.lower().replace("_", "-") == "utf-8" else spec.encoding
    try:
        with open(path, encoding=encoding, newline="") as handle:
            rows = _numbered_rows(handle, delimiter)
    except FileNotFoundError:
        raise DataError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise DataError(f"{path} is a directory, expected a CSV/TSV file") from None
    except UnicodeDecodeError as exc:
        # The error counts from the start of the decoder's chunk: find the byte in the file.
        offset, byte = _undecodable(path, encoding, exc)
        raise DataError(
            f"{path} cannot be decoded as {spec.encoding} (byte 0x{byte:02x} at offset "
            f"{offset}); set -o encoding=... to the file's encoding, e.g. latin-1"
        ) from None
    except LookupError:
        raise DataError(f"unknown encoding {spec.encoding!r} (for {path})") from None
    except csv.Error as exc:
        raise DataError(f"{path} is not a readable delimited file ({exc})") from None
    except OSError as exc:
        raise DataError(f"cannot read {path} ({exc.strerror or exc})") from None
    if not rows:
        raise DataError(f"{path} is empty: no data rows")
    header = rows.pop(0)[1] if spec.header else None
    text_i = _column_index(spec.text_column, header, path, "text")
    label_i = _column_index(spec.label_column, header, path, "label")
    rows = [(line, r) for line, r in rows if r and any(cell.strip() for cell in r)]  # blank
    if not rows:
        raise DataError(f"{path} has no data rows")
    need = max(text_i, label_i) + 1
    width = len(header) if header is not None else len(rows[0][1])
    for line, row in rows:
        if len(row) > width:
            # A delimiter inside an unquoted text: its columns shifted, its "label" is text.
            raise DataError(
                f"{path} line {line} has {len(row)} columns, the "
                f"{'header' if header is not None else 'first row'} {width} (a delimiter "
                "inside an unquoted text? quote the field, or fix -o delimiter)"
            )
        if len(row) < need:
            raise DataError(
                f"{path} line {line} has {len(row)} column(s), but column index {need - 1} is "
                f"needed (text {spec.text_column!r}, label {spec.label_column!r}; wrong "
                "-o delimiter?)"
            )
        if not row[label_i].strip():
            # Otherwise '' would become a class of its own, learnt and scored like the rest.
            raise DataError(
                f"{path} line {line} has an empty label (column {spec.label_column!r}); give "
                "every row a label, or remove the row"
            )
    return LabelledTexts(
        texts=[r[text_i] for _, r in rows],
        labels=[r[label_i].strip() for _, r in rows],
        source=str(path),
    )


def labels_to_ids(
    labels: Sequence[str], spec: TableSpec, source: str, classes: Sequence[str] | None = None
) -> tuple[np.ndarray, list[str]]:
    """(class ids, class names). Categories: sorted names (or the given `classes`, for a test
    file). Scores: class 1 when score > label_threshold, names ['neg', 'pos']."""
    if spec.label_threshold is not None:
        try:
            scores = np.array([float(s) for s in labels], dtype=np.float64)
        except ValueError:
            bad = next(s for s in labels if not _is_number(s))
            raise DataError(
                f"{source}: label {bad!r} is not a number, but -o label_threshold needs numeric "
                "scores (leave it unset for category labels)"
            ) from None
        return (scores > spec.label_threshold).astype(np.int64), ["neg", "pos"]
    if classes is None:
        classes = sorted(set(labels))
    index = {name: i for i, name in enumerate(classes)}
    unknown = sorted(set(labels) - set(index))
    if unknown:
        raise DataError(
            f"{source}: label {unknown[0]!r} does not occur in the training file "
            f"(classes: {', '.join(classes)})"
        )
    return np.array([index[s] for s in labels], dtype=np.int64), list(classes)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def stratified_split(labels: np.ndarray, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, test rows): each class split in the same proportion, by a fixed seed."""
    rng = np.random.default_rng(SPLIT_SEED)
    train, test = [], []
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        rows = rows[rng.permutation(len(rows))]
        n_test = int(round(len(rows) * test_fraction))
        test.append(rows[:n_test])
        train.append(rows[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


# --- from labelled texts to encoded splits ------------------------------------------------


@dataclass(frozen=True)
class EncodedSplits:
    """A text-classification dataset ready to become tensors."""

    train_ids: np.ndarray
    """(N, max_len) int64, 0-padded."""
    train_labels: np.ndarray
    test_ids: np.ndarray
    test_labels: np.ndarray
    vocab_size: int
    classes: list[str]
    source: str
    max_len: int


def check_splits(
    train_labels: np.ndarray, test_labels: np.ndarray, source: str, num_classes: int
) -> None:
    """One-line DataErrors for an empty split or a training split with a single class."""
    for name, labels in (("training", train_labels), ("test", test_labels)):
        if len(labels) == 0:
            raise DataError(
                f"the {name} split of {source} is empty; give more rows, a larger -o "
                "test_fraction, or a non-empty test file"
            )
    if num_classes < 2 or len(np.unique(train_labels)) < 2:
        raise DataError(
            f"the training split of {source} has a single class; a classifier needs two or more"
        )


def encode_splits(
    train_texts: Sequence[str],
    train_labels: np.ndarray,
    test_texts: Sequence[str],
    test_labels: np.ndarray,
    classes: list[str],
    vocab_size: int,
    max_len: int,
    source: str,
    strict_vocab: bool = True,
) -> EncodedSplits:
    """Tokenize both splits, build the vocabulary on the training split only, encode."""
    check_splits(train_labels, test_labels, source, len(classes))
    train_tokens = [tokenize(t) for t in train_texts]
    vocabulary = build_vocabulary(train_tokens, vocab_size, source, strict_vocab)
    train_ids, _ = encode(train_tokens, vocabulary, max_len)
    test_ids, _ = encode([tokenize(t) for t in test_texts], vocabulary, max_len)
    return EncodedSplits(
        train_ids=train_ids,
        train_labels=train_labels,
        test_ids=test_ids,
        test_labels=test_labels,
        vocab_size=vocabulary.size,
        classes=classes,
        source=source,
        max_len=max_len,
    )


def load_table_splits(
    path: Path,
    spec: TableSpec,
    test_path: Path | None,
    test_fraction: float,
    vocab_size: int,
    max_len: int,
    strict_vocab: bool = True,
) -> EncodedSplits:
    """A delimited file (and optional test file) as encoded train/test splits."""
    table = read_table(path, spec)
    labels, classes = labels_to_ids(table.labels, spec, table.source)
    if test_path is not None:
        test_table = read_table(test_path, spec)
        test_labels, _ = labels_to_ids(test_table.labels, spec, test_table.source, classes)
        train_texts, train_labels, test_texts = table.texts, labels, test_table.texts
        source = f"{path} + {test_path}"
    else:
        train_rows, test_rows = stratified_split(labels, test_fraction)
        train_texts = [table.texts[i] for i in train_rows]
        test_texts = [table.texts[i] for i in test_rows]
        train_labels, test_labels = labels[train_rows], labels[test_rows]
        source = str(path)
    return encode_splits(
        train_texts,
        train_labels,
        test_texts,
        test_labels,
        classes,
        vocab_size,
        max_len,
        source,
        strict_vocab,
    )
