"""JAX data parallelism trains exactly like one process at the same global batch: two
processes joined by jax.distributed (gloo), and one process with two host devices."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from trainscale.config.options import RunConfig, RunOptions  # noqa: E402
from trainscale.parallel.distenv import DistEnv  # noqa: E402
from trainscale.parallel.launcher import launch_workers  # noqa: E402
from trainscale.parallel.strategy import make_strategy  # noqa: E402
from trainscale.runner.resolve import resolve  # noqa: E402

from tests.distributed.jax_equivalence_worker import (  # noqa: E402
    tiny_dbn_data,
    train_and_return_variables,
)

NO_PRETRAINING = {"layers": "12", "pretrain_epochs": "0"}
STEPS = 8  # 96 samples / global batch 16: one epoch and the next epoch's reshuffle


def config(options: dict[str, str], **changes: object) -> RunConfig:
    """A JAX run of a tiny deterministic model (mnist-dbn: no dropout, no batch norm)."""
    flat: dict[str, object] = {
        "workload": "mnist-dbn",
        "framework": "jax",
        "data": "synthetic",
        "workload_options": options,
        "global_batch_size": 16,
        "steps": STEPS,
        "threads_per_worker": 1,
        "affinity": "none",
        "allow_oversubscribe": True,
        "warmup_steps_untimed": 1,
        # SGD: an update proportional to the gradient shows a wrong gradient scale (Adam's
        # hardly changes with it).
        "optimizer": "sgd",
        "lr": 0.5,
    }
    flat.update(changes)
    return resolve(RunOptions.from_flat(flat))


@pytest.fixture(scope="module")
def serial_run() -> tuple[dict, dict]:
    """The parameters one process ends with at global batch 16, and its summary."""
    from trainscale.frameworks.jax.trainer import train
    from trainscale.workloads import get_workload

    serial = config(NO_PRETRAINING, workers=1)
    strategy = make_strategy(serial, DistEnv())
    strategy.setup()
    outcome = train(serial, get_workload("mnist-dbn"), tiny_dbn_data(NO_PRETRAINING), strategy)
    return jax.tree_util.tree_map(np.asarray, outcome.model.variables["params"]), outcome.summary


def assert_same_params(got: dict, expected: dict, who: str) -> None:
    flat_got = dict(jax.tree_util.tree_flatten_with_path(got)[0])
    for path, value in jax.tree_util.tree_flatten_with_path(expected)[0]:
        np.testing.assert_allclose(
            flat_got[path],
            value,
            rtol=1e-4,
            atol=1e-6,
            err_msg=f"{who}: {jax.tree_util.keystr(path)} differs from one process's",
        )


def test_two_processes_match_one_at_the_same_global_batch(serial_run):
    serial_params, serial_summary = serial_run
    two = config(NO_PRETRAINING, workers=2)

    results = launch_workers(train_and_return_variables, (two.flat(),), 2)

    assert set(results) == {0, 1}
    for rank in (0, 1):
        assert_same_params(results[rank]["variables"]["params"], serial_params, f"rank {rank}")
    # Slowest-rank rule: both ranks report the same (gathered) step times.
    assert results[0]["step_times"] == results[1]["step_times"]
    assert len(results[0]["step_times"]) == STEPS
    assert results[0]["summary"]["num_samples"] == STEPS * 16
    # Each rank scores half the test set; the summed counts are one process's figures.
    for key in ("test_accuracy", "test_loss", "test_macro_f1"):
        assert results[0]["summary"][key] == pytest.approx(serial_summary[key], rel=1e-4)
    workers = results[0]["workers"]
    assert [w["rank"] for w in workers] == [0, 1]
    for worker in workers:
        assert worker["jax_distribution"].startswith("jax.distributed, 2 processes, gloo")
        assert worker["jax_threads"] == 1


def test_one_process_with_two_host_devices_matches_one_device(serial_run):
    serial_params, serial_summary = serial_run
    # --single-process: one fresh process (host devices are fixed when XLA starts).
    single = config(NO_PRETRAINING, workers=2, single_process=True)

    results = launch_workers(train_and_return_variables, (single.flat(),), 1)

    assert_same_params(results[0]["variables"]["params"], serial_params, "two host devices")
    (worker,) = results[0]["workers"]
    assert worker["jax_distribution"].startswith("one process, 2 host devices")
    assert worker["jax_threads"] == 2  # both replicas' threads, in one pool
    assert results[0]["summary"]["num_samples"] == STEPS * 16
    assert results[0]["summary"]["test_accuracy"] == pytest.approx(serial_summary["test_accuracy"])


def test_two_process_pretraining_keeps_the_replicas_identical():
    # CD draws its own samples on each worker, so no serial run equals it; the replicas,
    # averaging their statistics with a JAX all-reduce each step, must still agree exactly.
    options = {"layers": "12,6", "pretrain_epochs": "1"}
    two = config(options, workers=2, steps=2)

    results = launch_workers(train_and_return_variables, (two.flat(),), 2)

    rank0, rank1 = results[0]["variables"], results[1]["variables"]
    for name in ("params", "rbm"):
        for a, b in zip(
            jax.tree_util.tree_leaves(rank0[name]),
            jax.tree_util.tree_leaves(rank1[name]),
            strict=True,
        ):
            np.testing.assert_array_equal(a, b)
    summary = results[0]["summary"]
    layers = summary["pretrain"]["layers"]
    assert [layer["hidden"] for layer in layers] == [12, 6]
    assert all(layer["num_steps"] == 96 // 16 for layer in layers)  # global batch 16
    assert summary["pretrain_time_s"] > 0
