"""A small results store for the MLflow and TensorBoard exports: a completed run on real data
with per-epoch rows and distinct step times, a completed synthetic-data run, and a failed
run; made through the store's own API (`create_run`, `complete_run`, `fail_run`) in
milliseconds, with the summary keys a real run stores (`report_store.summary`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainscale.results.store import RunStore

from tests.helpers.report_store import MACHINE, FixtureConfig, summary

REAL_ID = "a1a1a1a1" + "0" * 24
SYNTHETIC_ID = "b2b2b2b2" + "0" * 24
FAILED_ID = "c3c3c3c3" + "0" * 24
FAILURE = "RuntimeError: worker 1 exited with code 1"
LONG_VALUE = "/data/" + "x" * 7000
"""A config value longer than MLflow takes as a param (6,000 characters)."""

STEP_TIMES = [0.05 + 0.001 * step for step in range(12)]
EPOCHS: list[dict[str, Any]] = [
    {"epoch": 1, "train_loss": 1.25, "test_loss": 1.0, "test_accuracy": 0.625,
     "train_clock_s": 0.35, "epoch_time_s": 0.35, "eval_time_s": 0.05},
    {"epoch": 2, "train_loss": 0.75, "test_loss": 0.5, "test_accuracy": 0.875,
     "train_clock_s": 0.7, "epoch_time_s": 0.35, "eval_time_s": None},
]  # fmt: skip

REAL = FixtureConfig(
    "cnn 2 workers", "mnist-cnn", 2, 1, "compact", [300.0], accuracies=[0.875],
    times_to_target=[0.7], extra_config={"data_dir": LONG_VALUE},
)  # fmt: skip
SYNTHETIC = FixtureConfig("text", "tweets-text", 1, 1, "0", [400.0], data="synthetic")
FAILED = FixtureConfig("cnn 4 workers", "mnist-cnn", 4, 1, "compact", [None])


def create(store: RunStore, run_id: str, config: FixtureConfig) -> None:
    """Register `config`'s run as 'running'."""
    store.create_run(
        run_id,
        config.workload,
        config.config(),
        MACHINE,
        data_kind=config.data,
        world_size=config.workers,
        threads_per_worker=config.threads_resolved,
        affinity=config.affinity,
        precision="fp32",
        global_batch_size=config.global_batch_size,
        config_hash=config.key(),
    )


def build_tracking_store(path: Path) -> Path:
    """The store described in the module docstring, at `path`."""
    with RunStore(path) as store:
        create(store, REAL_ID, REAL)
        store.complete_run(REAL_ID, summary(REAL, 0), EPOCHS, STEP_TIMES)
        create(store, SYNTHETIC_ID, SYNTHETIC)
        store.complete_run(SYNTHETIC_ID, summary(SYNTHETIC, 0), EPOCHS, STEP_TIMES[:5])
        create(store, FAILED_ID, FAILED)
        store.fail_run(FAILED_ID, FAILURE)
    return path
