"""`imdb-bilstm` and `imdb-bigru`: a bidirectional LSTM or GRU classifier on IMDB reviews.

One factory with a `cell` argument registers both. The data is the IMDB large movie review
set (25k/25k) as an `aclImdb` tree or Keras's `imdb.npz`, or any labelled CSV/TSV given
with `-o file=PATH` (e.g. short movie-review snippets with a score column).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainscale.data import encoded_cache, imdb
from trainscale.data.imdb import locate_imdb
from trainscale.data.tensors import DataRequest, DataSize, Located, TensorData
from trainscale.data.text import EncodedSplits, load_table_splits
from trainscale.errors import DataError
from trainscale.models.text_rnn import TextRNN
from trainscale.workloads.base import JAX, PYTORCH, TENSORFLOW, Recipe, RoughCost, Workload
from trainscale.workloads.registry import register
from trainscale.workloads.text_common import (
    TextDefaults,
    TextOptions,
    cache_options,
    describe_options,
    length_bucketing,
    located_splits,
    mean_length_batch,
    parse_options,
    synthetic_text,
    table_file,
    to_tensor_data,
)

FORMATS = ("auto", "aclimdb", "npz", "csv")
DEFAULTS: TextDefaults = {
    "text_column": "text",
    "label_column": "label",
    "vocab_size": 20_000,
    "max_len": 400,
}
IMDB_SIZE = DataSize(num_train=25_000, num_test=25_000)
MEDIAN_TOKENS = 200
"""Roughly the median IMDB review in tokens (words and punctuation), for synthetic lengths."""
OPTIONS = describe_options(
    {
        "format": "auto | aclimdb | npz | csv: which IMDB form to look for (auto: either, "
        "downloads imdb.npz); csv when -o file is given (default: auto)"
    },
    **DEFAULTS,
)


def imdb_options(options: Mapping[str, str]) -> TextOptions:
    """The workload's `-o` options, typed; ConfigError for a bad value."""
    return parse_options(options, formats=FORMATS, **DEFAULTS)


def check_imdb_options(options: Mapping[str, str]) -> None:
    """`Workload.check_options`: fail on a bad `-o` value before any worker starts."""
    imdb_options(options)


def load_encoded(opts: TextOptions, path: Path | None) -> EncodedSplits:
    """The encoded splits from a CSV/TSV (`-o file`), an aclImdb tree or an imdb.npz,
    through the encoded-text cache."""
    strict = opts.vocab_explicit
    table_file = opts.file
    if table_file is not None:
        files = [table_file, *([opts.test_file] if opts.test_file else [])]
        return encoded_cache.cached(
            files,
            cache_options(opts, "table"),
            lambda: load_table_splits(
                table_file,
                opts.table,
                opts.test_file,
                opts.test_fraction,
                opts.vocab_size,
                opts.max_len,
                strict,
            ),
        )
    assert path is not None
    if path.is_dir():
        if opts.format == "npz":
            raise DataError(f"-o format=npz, but {path} is a directory, not an imdb.npz file")
        files = [f for group in imdb.acl_files(path).values() for f in group]
        return encoded_cache.cached(
            files,
            cache_options(opts, "aclimdb"),
            lambda: imdb.load_acl_tree(path, opts.vocab_size, opts.max_len, strict),
        )
    if opts.format == "aclimdb":
        raise DataError(f"-o format=aclimdb, but {path} is a file, not an aclImdb folder")
    return encoded_cache.cached(
        [path],
        cache_options(opts, "npz"),
        lambda: imdb.load_imdb_npz(path, opts.vocab_size, opts.max_len, strict),
    )


def locate_imdb_data(request: DataRequest) -> Located:
    """Find (or download) the data and encode it fully (filling the cache the workers read);
    returns where it is and how many texts each split holds. Asked not to prepare, an
    aclImdb tree's files are only listed."""
    opts = imdb_options(request.options)
    given = table_file(opts, request)
    if given is not None:
        return located_splits(given, load_encoded(opts, None))
    path = locate_imdb(request.data_dir, opts.format, download=request.download)
    if not request.prepare and path.is_dir():  # counting the review files is enough
        files = imdb.acl_files(path)
        count = {
            split: len(files[f"{split}/neg"]) + len(files[f"{split}/pos"]) for split in imdb.SPLITS
        }
        return Located(path, DataSize(count["train"], count["test"]))
    return located_splits(path, load_encoded(opts, path))


def load_imdb_tensors(request: DataRequest) -> TensorData:
    """The encoded data as tensors (from the cache the parent filled, when it could)."""
    opts = imdb_options(request.options)
    path = None
    if table_file(opts, request) is None:
        path = locate_imdb(request.data_dir, opts.format, download=False)
    return to_tensor_data(load_encoded(opts, path), request, opts.bucketing)


def synthetic_imdb(request: DataRequest) -> TensorData:
    """Random reviews of IMDB's shapes: 25k/25k, 2 classes, the vocab_size and max_len asked."""
    opts = imdb_options(request.options)
    return synthetic_text(
        request,
        num_train=IMDB_SIZE.num_train,
        num_test=IMDB_SIZE.num_test,
        vocab_size=opts.vocab_size,
        num_classes=2,
        max_len=opts.max_len,
        median_len=MEDIAN_TOKENS,
        bucketing=opts.bucketing,
    )


EPOCH_S_2_CORES = {"lstm": 736.0, "gru": 1158.0}
"""Seconds of an epoch by cell (`RoughCost.epoch_s_2_cores`)."""


def keras_twin(meta: Mapping[str, Any], cell: str) -> Any:
    """The Keras twin of TextRNN (TensorFlow imported here, by a TensorFlow run only)."""
    from trainscale.models.tensorflow import KerasTwin, text_rnn

    return KerasTwin(
        text_rnn.build(meta["vocab_size"], meta["num_classes"], cell=cell),
        text_rnn.copy_torch_weights,
    )


def flax_twin(meta: Mapping[str, Any], cell: str) -> Any:
    """The flax twin of TextRNN (JAX imported here, by a JAX run only)."""
    from trainscale.models.jax import FlaxTwin, text_rnn

    vocab_size, num_classes = meta["vocab_size"], meta["num_classes"]
    return FlaxTwin(
        lambda dtype: text_rnn.TextRNN(vocab_size, num_classes, cell, dtype=dtype),
        text_rnn.from_torch,
    )


def imdb_rnn(cell: str) -> Workload:
    """The IMDB workload with a bidirectional `cell` ('lstm' or 'gru') recurrent layer."""
    name = f"imdb-bi{cell}"
    return Workload(
        name=name,
        description=f"Embedding + bidirectional {cell.upper()} + max/mean pooling, IMDB reviews",
        models={
            PYTORCH: lambda meta: TextRNN(meta["vocab_size"], meta["num_classes"], cell=cell),
            TENSORFLOW: lambda meta: keras_twin(meta, cell),
            JAX: lambda meta: flax_twin(meta, cell),
        },
        locate_real=locate_imdb_data,
        load_real=load_imdb_tensors,
        make_synthetic=synthetic_imdb,
        synthetic_size=IMDB_SIZE,
        # docs/text-workloads.md, "On the real IMDB set": the BiLSTM crossed 86% after
        # 18,624 and 24,800 samples (seeds 1 and 0), the BiGRU at 24,960 (seed 0); the
        # slowest, rounded up to a whole epoch of the 25,000 training reviews.
        rough_cost=RoughCost(epoch_s_2_cores=EPOCH_S_2_CORES[cell], samples_to_target=25_000),
        target_accuracy=0.86,
        recipe=Recipe(
            # Embedding 128, 1-layer BiLSTM/BiGRU 128 + max/mean pooling, 20k words, the last
            # 400 tokens: comparable from-scratch models reach 86-92% on IMDB (Dai & Le 2015;
            # Johnson & Zhang 2016; Keras's BiLSTM example, 87.8% with 200 tokens). The peak
            # lr was chosen on the movie snippets (docs/text-workloads.md): over 4 epochs
            # 2e-3 stopped at 71%, 5e-3 reached 76%, and 1e-2 was still stable (77.5%).
            optimizer="adam",
            lr=5e-3,
            batch_size=64,
            epochs=4.0,
            schedule="onecycle",
            warmup_fraction=0.1,
        ),
        options=OPTIONS,
        check_options=check_imdb_options,
        batch_order=length_bucketing,
        flops_batch=mean_length_batch,
        unequal_steps=True,
        recurrent=True,
    )


@register("imdb-bilstm")
def imdb_bilstm() -> Workload:
    return imdb_rnn("lstm")


@register("imdb-bigru")
def imdb_bigru() -> Workload:
    return imdb_rnn("gru")
