"""`trainscale run` for the text workloads: bad input (one line, exit 2, nothing stored),
2-worker synthetic runs, runs on generated files in the IMDB formats, and real-data runs
(slow; skipped without the files)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from trainscale.cli import main
from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.text_files import exploit_array, write_acl_tree, write_imdb_npz

SNIPPETS = Path(os.environ.get("TRAINSCALE_DATA_DIR", "/nonexistent")) / (
    "movie-snippets/movie_review_snippets.tsv"
)
TWEETS = Path(os.environ.get("TRAINSCALE_DATA_DIR", "/nonexistent")) / "tweets-airline/tweets.csv"
TEXT_WORKLOADS = ("imdb-bilstm", "imdb-bigru", "tweets-text")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    # The real-data tests take their files' paths from it at import; nothing else may see it.
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)


def labelled_csv(path: Path, rows: int = 40, encoding: str = "utf-8") -> Path:
    lines = ["text,label"]
    for i in range(rows):
        good = i % 2 == 0
        lines.append(f"{'great fun film' if good else 'dull awful mess'} number {i},"
                     f"{'pos' if good else 'neg'}")  # fmt: skip
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return path


def _bad_inputs(tmp: Path) -> list[tuple[list[str], str]]:
    wrong_tree = tmp / "wrong"
    (wrong_tree / "train" / "pos").mkdir(parents=True)
    (wrong_tree / "test").mkdir()
    latin = tmp / "latin.csv"
    latin.write_bytes("text,label\ncafé,pos\nnaïve,neg\n".encode("latin-1"))
    two_rows = tmp / "two.csv"
    two_rows.write_text("text,label\ngood,pos\nbad,neg\n")
    good = labelled_csv(tmp / "good.csv")
    hostile = write_imdb_npz(
        tmp / "imdb.npz", None, x_train=exploit_array(tmp / "pwned"), y_train=np.array([1])
    )
    return [
        (
            ["imdb-bilstm", "--data-dir", str(wrong_tree), "-o", "format=aclimdb"],
            "not an aclImdb tree (missing train/neg, test/neg, test/pos)",
        ),
        (["tweets-text", "-o", f"file={good}", "-o", "text_column=review"], "no column 'review'"),
        (["imdb-bigru", "-o", f"file={latin}"], "cannot be decoded as utf-8"),
        (["tweets-text", "-o", f"file={two_rows}", "-o", "label_column=label"], "test split"),
        (["imdb-bilstm", "-o", f"file={good}", "-o", "vocab_size=5000"], "larger than the data"),
        (["imdb-bilstm", "-o", f"file={tmp / 'none.csv'}"], "does not exist"),
        (["imdb-bilstm", "--data-dir", str(hostile)], "refusing to load"),
        (["tweets-text", "-o", "test_fraction=1.5"], "test_fraction=1.5"),
        (["imdb-bigru", "-o", "format=xml"], "format=xml"),
        (["tweets-text", "-o", "vocab_size=big"], "vocab_size=big"),
        (["tweets-text", "-o", "header=maybe"], "header=maybe"),
        (["tweets-text", "-o", "max_len=0"], "max_len=0"),
        (["imdb-bilstm", "-o", f"test_file={good}"], "needs -o file"),
        (["tweets-text", "--data-dir", str(tmp / "nothing")], "no tweet file found"),
        (["imdb-bilstm", "--data-dir", str(tmp / "nothing")], "IMDB not found"),
        (["imdb-bilstm", "-o", "max_len=100000000"], "at most 10,000 tokens per text"),
        # 40 texts, 8 held out: a batch of 33 does not fit the 32 training texts.
        (["imdb-bigru", "-o", f"file={good}", "--batch-size", "33"], "32 of 32 samples"),
        (["tweets-text", "--data", "synthetic", "-o", "vocab_size=10000000000"], "needs about"),
        (
            ["tweets-text", "-o", f"file={good}", "--data-dir", str(tmp)],
            "both say where the data is; give one",
        ),
    ]


@pytest.mark.parametrize("case", range(19))
def test_bad_input_is_one_line_exit_2_nothing_stored(case, tmp_path, store_path, capsys):
    args, fragment = _bad_inputs(tmp_path)[case]
    code = run_cli(["run", *args, "--no-download", "--store", str(store_path), "--quiet"])
    assert code == 2
    line = one_error_line(capsys)
    assert fragment in line, line
    assert not store_path.exists() or not RunStore(store_path).list_runs()
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("workload", ["tweets-text", "imdb-bilstm"])
def test_row_without_a_label_is_one_line(workload, tmp_path, store_path, capsys):
    data = labelled_csv(tmp_path / "posts.csv")
    lines = data.read_text().splitlines()
    lines.insert(7, "a post nobody labelled,")
    data.write_text("\n".join(lines) + "\n")
    args = ["run", workload, "-o", f"file={data}", "-o", "label_column=label", "--no-download"]
    assert run_cli([*args, "--store", str(store_path)]) == 2
    assert f"{data} line 8 has an empty label (column 'label')" in one_error_line(capsys)
    assert not store_path.exists() or not RunStore(store_path).list_runs()


@pytest.mark.parametrize("workload", TEXT_WORKLOADS)
def test_two_worker_synthetic_run(workload, store_path, capsys):
    code = main(
        [
            "run",
            workload,
            "--data",
            "synthetic",
            "--steps",
            "3",
            "--batch-size",
            "8",
            "--workers",
            "2",
            "--threads-per-worker",
            "1",
            "--allow-oversubscribe",
            "--warmup-steps",
            "1",
            "-o",
            "max_len=48",
            "--store",
            str(store_path),
            "--json",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "completed" and result["world_size"] == 2
    assert result["data"] == "synthetic" and result["test_accuracy"] is None
    with RunStore(store_path) as store:
        record = store.get_run(result["run_id"])
    assert record.summary["flops_per_sample"] > 0
    assert record.config["workload_options"] == {"max_len": "48"}


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: ["--data-dir", str(write_acl_tree(tmp))],
        lambda tmp: ["--data-dir", str(write_imdb_npz(tmp / "imdb.npz")), "-o", "format=npz"],
        lambda tmp: ["-o", f"file={labelled_csv(tmp / 'd.csv', 64)}"],
        # The file named twice, as -o file and as the data directory: one place, no clash.
        lambda tmp: ["-o", f"file={labelled_csv(tmp / 'd.csv', 64)}", "--data-dir", f"{tmp}/d.csv"],
    ],
    ids=["aclimdb", "npz", "csv", "csv-named-twice"],
)
def test_serial_run_on_generated_files(make, tmp_path, store_path, capsys):
    args = make(tmp_path)
    code = main(
        ["run", "imdb-bigru", *args, "--steps", "2", "--batch-size", "2", "--threads-per-worker",
         "1", "--store", str(store_path), "--json", "-o", "max_len=16"]
    )  # fmt: skip
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["data"] == "real" and 0 <= result["test_accuracy"] <= 1
    with RunStore(store_path) as store:
        record = store.get_run(result["run_id"])
    assert record.summary["test_macro_f1"] is not None
    # the parent encoded the data once; the worker read it back from the cache
    assert list((tmp_path / "cache" / "encoded-text").glob("*.npz"))


# --- real data (slow) ------------------------------------------------------------------------


def _real_run(workload: str, args: list[str], store_path, capsys) -> dict:
    workers = min(2, len(os.sched_getaffinity(0)))
    code = main(
        ["run", workload, *args, "--workers", str(workers), "--threads-per-worker", "1",
         "--store", str(store_path), "--json", "--quiet"]
    )  # fmt: skip
    assert code == 0
    return json.loads(capsys.readouterr().out)


SNIPPET_ARGS = [
    "-o", f"file={SNIPPETS}", "-o", "header=false", "-o", "text_column=2",
    "-o", "label_column=1", "-o", "label_threshold=0",
]  # fmt: skip


# Thresholds sit a few points under what these exact commands gave when measured with seeds
# 0 and 1 (BiLSTM 72.3% / 70.8%, BiGRU 71.6% / 70.9%, tweets 69.0% / 69.1% with macro-F1
# 0.647 / 0.650), so a change that costs accuracy fails while run-to-run noise does not.
@pytest.mark.slow
@pytest.mark.skipif(not SNIPPETS.is_file(), reason="TRAINSCALE_DATA_DIR lacks movie-snippets")
@pytest.mark.parametrize(("workload", "threshold"), [("imdb-bilstm", 0.68), ("imdb-bigru", 0.68)])
def test_real_movie_snippets(workload, threshold, store_path, capsys):
    result = _real_run(workload, [*SNIPPET_ARGS, "--epochs", "3"], store_path, capsys)
    assert result["data"] == "real" and result["world_size"] >= 1
    assert result["test_accuracy"] >= threshold, result["test_accuracy"]


@pytest.mark.slow
@pytest.mark.skipif(not TWEETS.is_file(), reason="TRAINSCALE_DATA_DIR lacks tweets-airline")
def test_real_tweets(store_path, capsys):
    args = ["-o", f"file={TWEETS}", "-o", "encoding=latin-1", "--epochs", "1"]
    result = _real_run("tweets-text", args, store_path, capsys)
    assert result["test_accuracy"] >= 0.67, result["test_accuracy"]
    assert result["test_macro_f1"] >= 0.62, result["test_macro_f1"]
