"""Schema 6: a schema-5 store's runs of the text workloads (steps of unequal work by design)
get their throughput over the mean step, as such runs are now stored; other runs keep theirs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from trainscale.metrics.run_flags import has_stalls
from trainscale.results.schema import SCHEMA_VERSION, UNEQUAL_STEP_WORKLOADS
from trainscale.results.store import RunStore
from trainscale.workloads import builtin_workload_names, get_workload

# A BiLSTM run on real IMDB as schema 5 stored it: 64 / 0.7527 s median step, 64 / 1.0734 s
# mean step; MFU and achieved FLOP/s made from the median-based figure.
MEDIAN_BASED = {
    "samples_per_s": 85.03,
    "samples_per_s_per_worker": 85.03,
    "samples_per_s_mean": 59.62,
    "step_time_s_median": 0.7527,
    "step_time_s_mean": 1.0734,
    "achieved_tflops": 0.0296,
    "mfu": 0.178,
    "mfu_vs_probe": None,
    "test_accuracy": 0.8676,
}


def _v5_store(path: Path) -> None:
    runs = {
        "bilstm": ("imdb-bilstm", MEDIAN_BASED),
        "cnn": ("mnist-cnn", MEDIAN_BASED),
        # Stored by a trainscale that already follows the rule: left alone.
        "tweets-new": (
            "tweets-text",
            {**MEDIAN_BASED, "samples_per_s": 59.62, "unequal_steps": True},
        ),
        # Without the mean (nothing to rewrite it from): left alone.
        "bigru-no-mean": ("imdb-bigru", {"samples_per_s": 40.0, "step_time_s_median": 1.6}),
    }
    with RunStore(path) as store:
        for run_id, (workload, _) in runs.items():
            store.create_run(
                run_id,
                workload,
                {"workload": workload},
                {"cpu_model": "X"},
                data_kind="real",
                world_size=1,
                threads_per_worker=1,
                affinity="compact",
                precision="bf16",
                global_batch_size=64,
            )
    conn = sqlite3.connect(path)
    for run_id, (_, summary) in runs.items():
        conn.execute(
            "UPDATE runs SET status = 'completed', summary_json = ? WHERE run_id = ?",
            (json.dumps(summary), run_id),
        )
    conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def test_a_schema_5_store_rates_the_text_runs_over_their_mean_step(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    _v5_store(path)
    with RunStore(path) as store:
        bilstm = store.get_run("bilstm").summary
        cnn = store.get_run("cnn").summary
        tweets = store.get_run("tweets-new").summary
        bigru = store.get_run("bigru-no-mean").summary
    assert SCHEMA_VERSION >= 6
    scale = 59.62 / 85.03
    assert bilstm["samples_per_s"] == pytest.approx(59.62)
    assert bilstm["samples_per_s_per_worker"] == pytest.approx(59.62)
    assert bilstm["achieved_tflops"] == pytest.approx(0.0296 * scale)
    assert bilstm["mfu"] == pytest.approx(0.178 * scale)
    assert bilstm["mfu_vs_probe"] is None
    assert bilstm["step_time_s_median"] == 0.7527  # the step time stays the median
    assert bilstm["unequal_steps"] is True and not has_stalls(bilstm)
    assert bilstm["test_accuracy"] == 0.8676
    # Equal-step workloads keep the median rule, stall flag and all.
    assert cnn == MEDIAN_BASED and has_stalls(cnn)
    assert tweets["samples_per_s"] == 59.62
    assert bigru == {"samples_per_s": 40.0, "step_time_s_median": 1.6}
    conn = sqlite3.connect(path)
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    conn.close()
    assert int(version) == SCHEMA_VERSION


def test_the_migrations_workloads_are_the_registrys_unequal_step_ones() -> None:
    declared = {name for name in builtin_workload_names() if get_workload(name).unequal_steps}
    assert declared == set(UNEQUAL_STEP_WORKLOADS)
