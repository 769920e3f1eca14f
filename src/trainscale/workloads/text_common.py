"""What the text workloads share: their `-o` options, tensors from encoded splits, synthetic
texts, length bucketing and the FLOPs sample.

Options are parsed and checked here in one place, so that a bad value fails in the parent
process with one line naming the option, before any worker starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import torch

from trainscale.data.bucketing import bucket_order
from trainscale.data.tensors import DataRequest, DataSize, Located, TensorData
from trainscale.data.text import PAD_ID, EncodedSplits, TableSpec
from trainscale.errors import ConfigError
from trainscale.hardware.resources import format_bytes

MAX_LEN = 10_000
"""Most tokens a text may keep (-o max_len). IMDB's longest review is about 2,500 tokens
and a tweet a few dozen; 10,000 is four times the longest review, past what these
recurrent and convolutional sentence classifiers are for. Every text is a row padded to
max_len int64 ids, so the cap also bounds memory: 80 KB a text (3.7 GiB for IMDB's 50,000
reviews), on top of which the run's memory check applies."""

TABLE_OPTIONS = {
    "file": "a CSV/TSV file of labelled texts to train and test on (split by test_fraction)",
    "test_file": "a separate CSV/TSV test file with the same columns (default: none, split file)",
    "text_column": "text column: header name or 0-based index (default: {text_column})",
    "label_column": "label column: header name or 0-based index (default: {label_column})",
    "header": "whether the file's first row names the columns: true|false (default: true)",
    "delimiter": "auto (tab for .tsv, else comma) | tab | a character (default: auto)",
    "encoding": "the file's text encoding, e.g. utf-8, latin-1 (default: utf-8)",
    "label_threshold": "labels are numeric scores, class 1 when score > this (default: unset, "
    "labels are category names)",
    "test_fraction": "share of each class held out for testing when no test_file is given "
    "(default: 0.2)",
    "vocab_size": "vocabulary size incl. padding and unknown, most frequent training tokens "
    "(default: {vocab_size}, or every training token if fewer)",
    "max_len": f"tokens kept per text, the last ones, 1 to {MAX_LEN} (default: {{max_len}})",
    "bucketing": "group texts of similar length into batches: true|false (default: true)",
}


def describe_options(extra: Mapping[str, str], **defaults: object) -> dict[str, str]:
    """The `Workload.options` help texts, with this workload's defaults filled in."""
    merged = {**extra, **TABLE_OPTIONS}
    return {key: text.format(**defaults) for key, text in merged.items()}


class TextDefaults(TypedDict):
    """A text workload's defaults of its `-o` options (`parse_options`' keywords)."""

    text_column: str
    label_column: str
    vocab_size: int
    max_len: int


@dataclass(frozen=True)
class TextOptions:
    """Parsed `-o` options of a text workload."""

    file: Path | None
    test_file: Path | None
    table: TableSpec
    test_fraction: float
    vocab_size: int
    vocab_explicit: bool
    """Whether the user set vocab_size (then a vocabulary larger than the data is an error)."""
    max_len: int
    bucketing: bool
    format: str = "auto"


def _bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ConfigError(f"-o {key}={value}: expected true or false")


def _int(key: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"-o {key}={value}: expected a whole number") from None
    if number < minimum:
        raise ConfigError(f"-o {key}={value}: must be at least {minimum}")
    return number


def _max_len(value: str) -> int:
    """-o max_len, from 1 to MAX_LEN; the error says what a text would take in memory."""
    number = _int("max_len", value, 1)
    if number > MAX_LEN:
        per_text = format_bytes(number * 8)
        raise ConfigError(
            f"-o max_len={value}: at most {MAX_LEN:,} tokens per text (every text is a row "
            f"of max_len int64 ids: {per_text} a text at this length)"
        )
    return number


def _column(key: str, value: str) -> str:
    if not value.strip():
        raise ConfigError(f"-o {key}= is empty: give a column name or a 0-based index")
    return value.strip()


def parse_options(
    options: Mapping[str, str],
    *,
    text_column: str,
    label_column: str,
    vocab_size: int,
    max_len: int,
    formats: tuple[str, ...] = ("auto",),
) -> TextOptions:
    """Typed options with the workload's defaults; ConfigError naming a bad one."""
    fmt = options.get("format", "auto")
    if fmt not in formats:
        raise ConfigError(f"-o format={fmt}: expected one of {', '.join(formats)}")
    fraction_text = options.get("test_fraction", "0.2")
    try:
        fraction = float(fraction_text)
    except ValueError:
        fraction = math.nan
    if not 0 < fraction < 1:
        raise ConfigError(f"-o test_fraction={fraction_text}: expected a number in (0, 1)")
    threshold = options.get("label_threshold")
    try:
        label_threshold = float(threshold) if threshold is not None else None
    except ValueError:
        raise ConfigError(f"-o label_threshold={threshold}: expected a number") from None
    delimiter = options.get("delimiter", "auto")
    if delimiter not in ("auto", "tab", "\\t") and len(delimiter) != 1:
        raise ConfigError(f"-o delimiter={delimiter}: expected auto, tab or one character")
    file = Path(options["file"]).expanduser() if options.get("file") else None
    test_file = Path(options["test_file"]).expanduser() if options.get("test_file") else None
    if test_file is not None and file is None:
        raise ConfigError("-o test_file needs -o file (the training file) as well")
    if fmt == "csv" and file is None:
        raise ConfigError("-o format=csv needs -o file=PATH")
    if file is not None and fmt not in ("auto", "csv"):
        raise ConfigError(f"-o file reads a CSV/TSV; it cannot be combined with -o format={fmt}")
    return TextOptions(
        file=file,
        test_file=test_file,
        table=TableSpec(
            text_column=_column("text_column", options.get("text_column", text_column)),
            label_column=_column("label_column", options.get("label_column", label_column)),
            header=_bool("header", options.get("header", "true")),
            delimiter=delimiter,
            encoding=options.get("encoding", "utf-8"),
            label_threshold=label_threshold,
        ),
        test_fraction=fraction,
        # 3: padding, unknown and at least one real token.
        vocab_size=_int("vocab_size", options.get("vocab_size", str(vocab_size)), 3),
        vocab_explicit="vocab_size" in options,
        max_len=_max_len(options.get("max_len", str(max_len))),
        bucketing=_bool("bucketing", options.get("bucketing", "true")),
        format="csv" if file is not None else fmt,
    )


def cache_options(opts: TextOptions, kind: str) -> dict[str, object]:
    """Everything that changes the encoded result, for the encoded-text cache key."""
    return {
        "kind": kind,
        "table": vars(opts.table) if kind == "table" else None,
        "test_fraction": opts.test_fraction if kind == "table" and not opts.test_file else None,
        "vocab_size": opts.vocab_size,
        "strict": opts.vocab_explicit,
        "max_len": opts.max_len,
    }


def table_file(opts: TextOptions, request: DataRequest) -> Path | None:
    """`-o file`, the one file to read; ConfigError where --data-dir names another place too
    (one of the two would be ignored without a word). The workers are handed the file the
    parent found as their data directory: that one is the file itself."""
    given = request.data_dir
    if opts.file is not None and given is not None and not _same_place(given, opts.file):
        raise ConfigError(
            f"-o file={opts.file} and --data-dir {request.data_dir} both say where the data "
            "is; give one"
        )
    return opts.file


def _same_place(first: Path, second: Path) -> bool:
    return os.path.realpath(first) == os.path.realpath(second)


def located_splits(path: Path, splits: EncodedSplits) -> Located:
    """`Workload.locate_real`'s answer for encoded texts: where, and how many of each."""
    return Located(path, DataSize(len(splits.train_ids), len(splits.test_ids)))


def to_tensor_data(splits: EncodedSplits, request: DataRequest, bucketing: bool) -> TensorData:
    """Tensors for the trainer. The test set is sorted by length: evaluation batches are then
    trimmed to similar lengths too (evaluation is off the clock, but not free)."""
    train_x = torch.from_numpy(splits.train_ids)[: request.max_train]
    train_y = torch.from_numpy(splits.train_labels)[: request.max_train]
    test_x = torch.from_numpy(splits.test_ids)[: request.max_test]
    test_y = torch.from_numpy(splits.test_labels)[: request.max_test]
    by_length = torch.argsort((test_x != PAD_ID).sum(dim=1), stable=True)
    return TensorData(
        train_x=train_x.contiguous(),
        train_y=train_y.contiguous(),
        test_x=test_x[by_length].contiguous(),
        test_y=test_y[by_length].contiguous(),
        kind="real",
        source=splits.source,
        meta={
            "num_classes": len(splits.classes),
            "classes": list(splits.classes),
            "vocab_size": splits.vocab_size,
            "max_len": splits.max_len,
            "bucketing": bucketing,
        },
    )


def synthetic_text(
    request: DataRequest,
    *,
    num_train: int,
    num_test: int,
    vocab_size: int,
    num_classes: int,
    max_len: int,
    median_len: int,
    bucketing: bool = True,
) -> TensorData:
    """Random token ids with log-normal lengths (median `median_len`, clipped to [1, max_len])
    and uniform labels: the real data's shapes and meta, for throughput only."""
    g = torch.Generator().manual_seed(request.seed)
    median = min(median_len, max_len)

    def texts(n: int) -> torch.Tensor:
        lengths = (torch.randn(n, generator=g) * 0.6).exp() * median
        lengths = lengths.round().clamp(1, max_len).long()
        ids = torch.randint(PAD_ID + 2, vocab_size, (n, max_len), generator=g)
        return ids.masked_fill(torch.arange(max_len)[None, :] >= lengths[:, None], PAD_ID)

    num_train = request.max_train or num_train
    num_test = request.max_test or num_test
    train_x, test_x = texts(num_train), texts(num_test)
    return TensorData(
        train_x=train_x,
        train_y=torch.randint(0, num_classes, (num_train,), generator=g),
        test_x=test_x,
        test_y=torch.randint(0, num_classes, (num_test,), generator=g),
        kind="synthetic",
        source=(
            f"synthetic: uniform token ids < {vocab_size}, log-normal lengths (median "
            f"{median}, max {max_len}), uniform labels over {num_classes}, seed {request.seed}"
        ),
        meta={
            "num_classes": num_classes,
            "classes": [str(c) for c in range(num_classes)],
            "vocab_size": vocab_size,
            "max_len": max_len,
            "bucketing": bucketing,
        },
    )


def length_bucketing(
    order: torch.Tensor, data: TensorData, batch_size: int, generator: torch.Generator
) -> torch.Tensor:
    """`Workload.batch_order` for texts: batches of similar length (data/bucketing.py),
    unless the run was asked for random batches (-o bucketing=false)."""
    if not data.meta.get("bucketing", True):
        return order
    # `order` is a CPU index (Sharding.shard_indices) while the texts may live on an
    # accelerator: gather the lengths where the texts are, then bring only the lengths (one
    # number a text, once an epoch) to `order`'s device, where the CPU-seeded bucketing
    # runs. The result stays on `order`'s device; the caller moves it to the data's.
    train_x = data.train_x
    lengths = (train_x.index_select(0, order.to(train_x.device)) != PAD_ID).sum(dim=1)
    return bucket_order(order, lengths.to(order.device), batch_size, generator)


def mean_length_batch(data: TensorData) -> tuple[torch.Tensor, torch.Tensor]:
    """`Workload.flops_batch` for texts: two texts of the mean training length.

    The models skip padding (packed sequences) or trim it, so their FLOPs grow with each
    text's length, linearly: the count on a text of the mean length is the mean per sample.
    """
    lengths = (data.train_x != PAD_ID).sum(dim=1).clamp(min=1)
    mean = max(1, round(lengths.float().mean().item()))
    # On the data's device, which is the model's: a CPU batch would fail the count on a GPU.
    x = torch.full(
        (2, mean), PAD_ID + 2, dtype=data.train_x.dtype, device=data.train_x.device
    )  # any real token id
    return x, data.train_y[:2]
