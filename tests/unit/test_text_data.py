"""Text data layer: tokenizer, vocabulary, encoding, the delimited-file reader, the split,
and the encoded-text cache."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from trainscale.data import encoded_cache
from trainscale.data.text import (
    PAD_ID,
    UNK_ID,
    TableSpec,
    build_vocabulary,
    encode,
    encode_ids,
    labels_to_ids,
    load_table_splits,
    read_table,
    stratified_split,
    tokenize,
)
from trainscale.errors import DataError


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))


# --- tokenizer, vocabulary, encoding -----------------------------------------------------


def test_tokenize_lowercases_strips_html_and_splits_punctuation() -> None:
    text = "A <b>GREAT</b> film.<br /><br />I don't care: 10/10!"
    assert tokenize(text) == [
        "a", "great", "film", ".", "i", "don't", "care", ":", "10", "/", "10", "!",
    ]  # fmt: skip
    assert tokenize("") == []
    assert tokenize("snake_case #tag @user") == ["snake", "_", "case", "#", "tag", "@", "user"]


def test_vocabulary_most_frequent_with_deterministic_ties() -> None:
    train = [["b", "a", "c"], ["a", "c", "d"], ["a"]]
    vocab = build_vocabulary(train, vocab_size=4)
    # a (3), then c (2); b and d tie at 1 and are left out by the size limit
    assert vocab.itos == ("<pad>", "<unk>", "a", "c")
    assert build_vocabulary(train, vocab_size=5).itos[-1] == "b"  # tie broken by the string
    assert build_vocabulary(list(reversed(train)), vocab_size=6) == build_vocabulary(train, 6)


def test_vocabulary_larger_than_the_data() -> None:
    train = [["a", "b"], ["b"]]
    with pytest.raises(DataError, match=r"vocab_size 10 is larger than the data.*2 distinct"):
        build_vocabulary(train, vocab_size=10, source="f.csv")
    assert build_vocabulary(train, vocab_size=10, strict=False).size == 4


def test_encode_pads_keeps_the_end_and_maps_unknowns() -> None:
    vocab = build_vocabulary([["good", "bad", "good"]], vocab_size=4)
    good, bad = vocab.stoi()["good"], vocab.stoi()["bad"]
    ids, lengths = encode([["good", "film"], ["bad"] * 3 + ["good"], []], vocab, max_len=3)
    assert ids.dtype == np.int64 and ids.shape == (3, 3)
    assert ids.tolist() == [[good, UNK_ID, PAD_ID], [bad, bad, good], [UNK_ID, PAD_ID, PAD_ID]]
    assert lengths.tolist() == [2, 3, 1]
    assert encode_ids([[5, 6, 7, 8]], 2)[0].tolist() == [[7, 8]]


# --- delimited files ---------------------------------------------------------------------


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


def test_csv_with_header_by_name(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", 'label,text\npos,"great, really"\nneg,awful\n')
    table = read_table(path, TableSpec(text_column="text", label_column="label"))
    assert table.texts == ["great, really", "awful"]
    assert table.labels == ["pos", "neg"]
    ids, classes = labels_to_ids(table.labels, TableSpec(), str(path))
    assert classes == ["neg", "pos"] and ids.tolist() == [1, 0]


def test_a_row_with_an_unquoted_delimiter_stops_the_read_naming_its_line(
    tmp_path: Path,
) -> None:
    # Its label would be 'dull plot': a class made from a damaged row.
    rows = "text,label\nfine,pos\ngreat acting, dull plot,neg\n"
    path = write(tmp_path / "t.csv", rows)
    with pytest.raises(DataError, match=r"line 3 has 3 columns, the header 2 \(a delimiter"):
        read_table(path, TableSpec())


def test_a_tsv_text_opening_with_a_quote_is_text(tmp_path: Path) -> None:
    rows = 'text\tlabel\n"the best film ever\tpos\n"Avatar" was dull\tneg\nfine\tpos\n'
    table = read_table(write(tmp_path / "q.tsv", rows), TableSpec())
    assert table.texts == ['"the best film ever', '"Avatar" was dull', "fine"]
    assert table.labels == ["pos", "neg", "pos"]


def test_a_byte_order_mark_is_not_part_of_the_header(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbftext,label\nfine,pos\n")  # Excel's "CSV UTF-8"
    assert read_table(path, TableSpec()).texts == ["fine"]


def test_an_undecodable_byte_is_named_at_its_offset_in_the_file(tmp_path: Path) -> None:
    head = "text,label\n" + "fine film,pos\n" * 8000  # past the decoder's first chunk
    path = tmp_path / "late.csv"
    path.write_bytes(head.encode() + b"caf\xe9,pos\n")
    offset = len(head.encode()) + 3
    with pytest.raises(DataError, match=rf"byte 0xe9 at offset {offset}\)"):
        read_table(path, TableSpec())


def test_tsv_without_header_by_index_and_threshold(tmp_path: Path) -> None:
    path = write(tmp_path / "s.tsv", "1\t2.5\tfine film\n2\t-0.6\ttepid\n3\t0\tmeh\n")
    spec = TableSpec(text_column="2", label_column="1", header=False, label_threshold=0.0)
    table = read_table(path, spec)  # tab chosen from the .tsv extension
    assert table.texts == ["fine film", "tepid", "meh"]
    ids, classes = labels_to_ids(table.labels, spec, str(path))
    assert ids.tolist() == [1, 0, 0] and classes == ["neg", "pos"]  # score > 0 is positive


@pytest.mark.parametrize("delimiter", ["tab", "\\t", "\t"])
def test_explicit_tab_delimiter(tmp_path: Path, delimiter: str) -> None:
    path = write(tmp_path / "s.txt", "text\tlabel\na b\tx\n")
    table = read_table(path, TableSpec(delimiter=delimiter))
    assert table.texts == ["a b"] and table.labels == ["x"]


def test_encodings(tmp_path: Path) -> None:
    path = write(tmp_path / "l1.csv", "text,label\ncafé crème,a\nnaïve,b\n", encoding="latin-1")
    table = read_table(path, TableSpec(encoding="latin-1"))
    assert table.texts == ["café crème", "naïve"]
    with pytest.raises(DataError) as info:
        read_table(path, TableSpec(encoding="utf-8"))
    message = str(info.value)
    assert str(path) in message and "utf-8" in message and "encoding" in message
    assert "\n" not in message
    with pytest.raises(DataError, match="unknown encoding 'klingon'"):
        read_table(path, TableSpec(encoding="klingon"))


@pytest.mark.parametrize(
    ("content", "spec", "fragment"),
    [
        ("text,label\na,b\n", TableSpec(text_column="review"), "no column 'review'"),
        ("text;label\na;b\n", TableSpec(), "no column 'text'"),
        ("a,b\n", TableSpec(text_column="5", label_column="0", header=False), "column index 5"),
        ("a,b\n", TableSpec(header=False), "read without a header"),
        ("text,label\n", TableSpec(), "no data rows"),
        ("", TableSpec(), "no data rows"),
    ],
)
def test_bad_tables_are_one_line(tmp_path: Path, content: str, spec: TableSpec, fragment: str):
    path = write(tmp_path / "bad.csv", content)
    with pytest.raises(DataError) as info:
        read_table(path, spec)
    assert fragment in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("content", "spec", "line"),
    [
        ("text,label\ngood,pos\nbad,\nfine,pos\n", TableSpec(), 3),
        # Blank lines and a quoted text over two lines: the number is the file's line.
        ('text,label\n\n"two\nlines",pos\n\nbad,  \n', TableSpec(), 6),
        ("1\t\tno score\n2\t0.5\tfine\n", TableSpec("2", "1", header=False), 1),
        ("text,label\ngood,1\nbad,\n", TableSpec(label_threshold=0.5), 3),
    ],
    ids=["csv", "line-numbers", "tsv-no-header", "scores"],
)
def test_empty_label_is_refused_with_its_line(
    tmp_path: Path, content: str, spec: TableSpec, line: int
) -> None:
    path = write(tmp_path / ("t.tsv" if "\t" in content else "t.csv"), content)
    with pytest.raises(DataError) as info:
        read_table(path, spec)
    message = str(info.value)
    assert message.startswith(f"{path} line {line} has an empty label"), message
    assert "\n" not in message


def test_empty_label_never_becomes_a_class(tmp_path: Path) -> None:
    rows = [f"good film {i},pos" if i % 2 else f"bad film {i},neg" for i in range(20)]
    train = write(tmp_path / "train.csv", "text,label\n" + "\n".join(rows) + "\n")
    test = write(tmp_path / "test.csv", "text,label\ngood,pos\nno label here,\n")
    with pytest.raises(DataError, match=rf"{test} line 3 has an empty label"):
        load_table_splits(train, TableSpec(), test, 0.2, 100, 8, strict_vocab=False)
    train.write_text("text,label\n" + "\n".join([*rows, "unlabelled,"]) + "\n")
    with pytest.raises(DataError, match=rf"{train} line 22 has an empty label"):
        load_table_splits(train, TableSpec(), None, 0.2, 100, 8, strict_vocab=False)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        read_table(tmp_path / "nope.csv", TableSpec())
    with pytest.raises(DataError, match="is a directory"):
        read_table(tmp_path, TableSpec())


def test_non_numeric_score_with_threshold(tmp_path: Path) -> None:
    spec = TableSpec(label_threshold=0.0)
    with pytest.raises(DataError, match="label 'pos' is not a number"):
        labels_to_ids(["1.5", "pos"], spec, "f.csv")


def test_stratified_split_is_proportional_disjoint_and_fixed() -> None:
    labels = np.array([0] * 80 + [1] * 20)
    train, test = stratified_split(labels, 0.25)
    assert len(set(train) & set(test)) == 0 and len(train) + len(test) == 100
    assert (labels[test] == 0).sum() == 20 and (labels[test] == 1).sum() == 5
    again = stratified_split(labels, 0.25)
    assert np.array_equal(train, again[0]) and np.array_equal(test, again[1])


def test_vocabulary_comes_from_the_training_split_only(tmp_path: Path) -> None:
    train = write(tmp_path / "train.csv", "text,label\ngood good,pos\nbad,neg\n")
    test = write(tmp_path / "test.csv", "text,label\ngood unseen,pos\n")
    splits = load_table_splits(
        train, TableSpec(), test, 0.2, vocab_size=10, max_len=4, strict_vocab=False
    )
    assert splits.vocab_size == 4  # pad, unk, good, bad
    assert splits.test_ids[0].tolist() == [2, UNK_ID, 0, 0]  # "unseen" is unknown
    assert splits.classes == ["neg", "pos"] and splits.test_labels.tolist() == [1]


def test_test_file_with_an_unseen_class(tmp_path: Path) -> None:
    train = write(tmp_path / "train.csv", "text,label\na,pos\nb,neg\n")
    test = write(tmp_path / "test.csv", "text,label\nc,neutral\n")
    with pytest.raises(DataError, match="label 'neutral' does not occur in the training file"):
        load_table_splits(train, TableSpec(), test, 0.2, 10, 4, strict_vocab=False)


def test_empty_split_and_single_class(tmp_path: Path) -> None:
    two = write(tmp_path / "two.csv", "text,label\na,pos\nb,neg\n")
    with pytest.raises(DataError, match="test split .* is empty"):
        load_table_splits(two, TableSpec(), None, 0.2, 10, 4, strict_vocab=False)
    one = write(tmp_path / "one.csv", "text,label\n" + "a,pos\n" * 10)
    with pytest.raises(DataError, match="single class"):
        load_table_splits(one, TableSpec(), None, 0.2, 10, 4, strict_vocab=False)


# --- encoded-text cache --------------------------------------------------------------------


def test_cache_hits_misses_and_damage(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "text,label\n" + "good film,pos\nbad film,neg\n" * 10)
    calls = []

    def build():
        calls.append(1)
        return load_table_splits(path, TableSpec(), None, 0.2, 10, 8, strict_vocab=False)

    first = encoded_cache.cached([path], {"max_len": 8}, build)
    second = encoded_cache.cached([path], {"max_len": 8}, build)
    assert len(calls) == 1
    assert np.array_equal(first.train_ids, second.train_ids) and second.train_ids.dtype == np.int64
    assert second.classes == first.classes and second.vocab_size == first.vocab_size
    encoded_cache.cached([path], {"max_len": 9}, build)  # other options: other entry
    assert len(calls) == 2
    write(path, path.read_text() + "fine film,pos\n")  # edited file: never served stale
    encoded_cache.cached([path], {"max_len": 8}, build)
    assert len(calls) == 3
    # An edit that keeps the size is told by its modification time.
    write(path, path.read_text().replace("good", "nice"))
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000))
    encoded_cache.cached([path], {"max_len": 8}, build)
    assert len(calls) == 4
    encoded_cache.cached([path], {"max_len": 8}, build)  # and then served from the cache
    assert len(calls) == 4
    for entry in (tmp_path / "cache" / "encoded-text").glob("*.npz"):
        entry.write_bytes(b"garbage")
    encoded_cache.cached([path], {"max_len": 8}, build)  # damaged entry: rebuilt
    assert len(calls) == 5
    with pytest.raises(DataError, match="does not exist"):
        encoded_cache.cached([tmp_path / "missing.csv"], {}, build)
