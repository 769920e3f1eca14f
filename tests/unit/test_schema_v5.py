"""Schema 5: a schema-4 store's runs get the median-based throughput, the mean kept beside it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from trainscale.metrics.run_flags import has_stalls
from trainscale.results.schema import SCHEMA_VERSION
from trainscale.results.store import RunStore

STEPS = [0.030, 0.031, 0.033, 0.035, 0.300]
"""Timed steps of a run that stalled once: mean 0.0858 s, median 0.033 s."""


def _v4_store(path: Path) -> None:
    """A store as schema 4 left it: `samples_per_s` = global batch x steps / their sum."""
    with RunStore(path) as store:
        for run_id, batch, workers in (("stalled", 64, 2), ("emulated", 64, 1), ("nobatch", 8, 1)):
            store.create_run(
                run_id,
                "mnist-cnn",
                {"workload": "mnist-cnn", "batch_size": batch // workers},
                {"cpu_model": "X"},
                data_kind="synthetic",
                world_size=workers,
                threads_per_worker=1,
                affinity="none",
                precision="fp32",
                global_batch_size=batch,
            )
    old = {
        "samples_per_s": 64 * len(STEPS) / sum(STEPS),
        "samples_per_s_per_worker": 32 * len(STEPS) / sum(STEPS),
        "step_time_s_median": 0.033,
        "step_time_s_iqr": 0.004,
        "test_accuracy": None,
        # Made from the old samples_per_s: 1 MFLOP per sample.
        "achieved_tflops": 1e6 * 64 * len(STEPS) / sum(STEPS) / 1e12,
        "mfu": 0.01,
        "mfu_vs_probe": None,
    }
    emulation = {"emulation": {"mode": "sync", "workers": 4}, "train_time_s": 1.0}
    conn = sqlite3.connect(path)
    for run_id, summary in (("stalled", old), ("emulated", emulation), ("nobatch", old)):
        conn.execute(
            "UPDATE runs SET status = 'completed', summary_json = ? WHERE run_id = ?",
            (json.dumps(summary), run_id),
        )
    conn.execute("UPDATE runs SET global_batch_size = NULL WHERE run_id = 'nobatch'")
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def test_a_schema_4_store_opens_with_median_throughput_and_the_mean_kept(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    _v4_store(path)
    with RunStore(path) as store:
        stalled = store.get_run("stalled").summary
        emulated = store.get_run("emulated").summary
        nobatch = store.get_run("nobatch").summary
    assert SCHEMA_VERSION >= 5
    # The mean-based figures move to their own keys, exactly.
    assert stalled["samples_per_s_mean"] == pytest.approx(64 * 5 / sum(STEPS))
    assert stalled["step_time_s_mean"] == pytest.approx(sum(STEPS) / 5)
    # The headline is now the batch over the median step: the one stall no longer halves it.
    assert stalled["samples_per_s"] == pytest.approx(64 / 0.033)
    assert stalled["samples_per_s_per_worker"] == pytest.approx(32 / 0.033)
    assert stalled["step_time_s_median"] == 0.033 and stalled["test_accuracy"] is None
    assert has_stalls(stalled)
    # The hardware figures made from the throughput follow it.
    assert stalled["achieved_tflops"] == pytest.approx(1e6 * 64 / 0.033 / 1e12)
    assert stalled["mfu"] == pytest.approx(0.01 * (sum(STEPS) / 5) / 0.033)
    assert stalled["mfu_vs_probe"] is None
    # An emulation has no step time; a run without its global batch cannot be rewritten.
    assert emulated == {"emulation": {"mode": "sync", "workers": 4}, "train_time_s": 1.0}
    assert "step_time_s_mean" not in nobatch
    assert nobatch["samples_per_s"] == pytest.approx(64 * 5 / sum(STEPS))
    conn = sqlite3.connect(path)
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    conn.close()
    assert int(version) == SCHEMA_VERSION


def test_the_migration_runs_once(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    _v4_store(path)
    with RunStore(path) as store:
        first = store.get_run("stalled").summary
    with RunStore(path) as store:
        assert store.get_run("stalled").summary == first


def test_a_damaged_summary_does_not_stop_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    _v4_store(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE runs SET summary_json = '{not json' WHERE run_id = 'emulated'")
    conn.commit()
    conn.close()
    with RunStore(path) as store:
        assert store.get_run("stalled").summary["samples_per_s"] == pytest.approx(64 / 0.033)
