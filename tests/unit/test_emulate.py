"""Accuracy emulation on tiny tensors: each mode against the training it must reproduce."""

from __future__ import annotations

import pytest
import torch

from trainscale.config.options import RunOptions
from trainscale.emulation.async_ps import compute_time
from trainscale.emulation.engine import emulate, plan_global_steps
from trainscale.emulation.local_sgd import LocalSGD
from trainscale.emulation.options import EmulationOptions
from trainscale.emulation.record import complete_emulation, create_emulation_row, emulation_tag
from trainscale.emulation.spec import (
    EmulationSpec,
    emulation_config,
    resolve_spec,
)
from trainscale.emulation.streams import make_streams
from trainscale.errors import ConfigError
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.results.store import RunStore
from trainscale.runner.resolve import resolve
from trainscale.train.trainer import train

from tests.helpers.tiny import tiny_config, tiny_data, tiny_workload

# fp32 on every machine: emulation is compared number for number with the serial trainer.
TINY = dict(
    workload="mnist-cnn",
    threads_per_worker=1,
    affinity="none",
    warmup_steps_untimed=1,
    precision="fp32",
)


def setup(mode: str, workers: int, b: int = 8, steps: int = 6, **spec_and_options):
    """A resolved (config, spec) for the tiny workload."""
    spec_fields = {
        k: spec_and_options.pop(k)
        for k in ("local_steps", "staleness_spread", "staleness_aware_lr")
        if k in spec_and_options
    }
    spec = resolve_spec(EmulationSpec(mode, workers, b, **spec_fields), 64)
    opts = RunOptions.from_flat({**TINY, "steps": steps, **spec_and_options})
    config = emulation_config(opts, spec, locate_data=False).with_(channels_last=False)
    return config, spec


def run(mode: str, workers: int, **kwargs):
    config, spec = setup(mode, workers, **kwargs)
    return emulate(config, spec, tiny_workload(), tiny_data())


def assert_same_parameters(a: torch.nn.Module, b: torch.nn.Module, **tolerance) -> None:
    tolerance = tolerance or {"rtol": 1e-4, "atol": 1e-5}
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, msg=f"parameter {name} differs", **tolerance)


def max_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(
        float((x - y).abs().max())
        for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )


# -- configuration ----------------------------------------------------------------------


@pytest.mark.parametrize("rule", ["none", "linear", "sqrt"])
def test_sync_lr_and_warmup_are_those_of_a_real_run_of_n_workers(rule):
    config, spec = setup("sync", 4, b=32, lr_scaling=rule)
    real = resolve(
        RunOptions.from_flat(
            {
                **TINY,
                "steps": 6,
                "workers": 4,
                "batch_size": 32,
                "lr_scaling": rule,
                "allow_oversubscribe": True,
            }
        )
    )
    assert config.optimisation.lr == pytest.approx(real.optimisation.lr)
    assert config.optimisation.warmup_fraction == real.optimisation.warmup_fraction
    assert (config.optimisation.batch_size, config.optimisation.global_batch_size) == (32, 128)
    assert spec.samples_per_step == 128
    if rule == "linear":  # 128 over the reference 64: twice the lr, and a longer warm-up
        assert config.optimisation.lr == pytest.approx(2 * config.optimisation.base_lr)
        assert config.optimisation.warmup_fraction >= 0.1


def test_async_scales_the_lr_to_one_workers_batch():
    config, spec = setup("async", 8, b=64, lr_scaling="linear")
    assert spec.samples_per_step == 64
    assert config.optimisation.lr == pytest.approx(config.optimisation.base_lr)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (EmulationSpec("sync", 0), "--workers"),
        (EmulationSpec("ring", 2), "--mode"),
        (EmulationSpec("sync", 2, local_steps=4), "--local-steps applies to --mode local-sgd"),
        (EmulationSpec("local-sgd", 2, local_steps=0), "--local-steps"),
        (EmulationSpec("sync", 2, staleness_spread=0.3), "--staleness-spread applies"),
        (EmulationSpec("async", 2, staleness_spread=-1.0), "--staleness-spread"),
        (EmulationSpec("local-sgd", 2, staleness_aware_lr=True), "--staleness-aware-lr"),
        (EmulationSpec("sync", 2, per_worker_batch_size=0), "--per-worker-batch-size"),
    ],
)
def test_bad_specs_are_config_errors(spec, fragment):
    with pytest.raises(ConfigError, match=fragment):
        resolve_spec(spec, 64)


def test_synthetic_data_is_refused():
    spec = resolve_spec(EmulationSpec("sync", 2), 64)
    with pytest.raises(ConfigError, match="real data"):
        emulation_config(
            RunOptions.from_flat({**TINY, "data": "synthetic"}), spec, locate_data=False
        )
    config, spec = setup("sync", 2)
    synthetic = tiny_data()
    synthetic = type(synthetic)(**{**synthetic.__dict__, "kind": "synthetic"})
    with pytest.raises(ConfigError, match="real data"):
        emulate(config, spec, tiny_workload(), synthetic)


def test_the_worker_counts_are_distinct_whole_numbers():
    assert EmulationOptions(workers=(1, 2, 4, 8), mode="sync").workers == (1, 2, 4, 8)
    for bad in ((0,), (2, 2), (-1,), (), (2.5,), (True,)):
        with pytest.raises(ConfigError, match="--workers"):
            EmulationOptions(workers=bad, mode="sync")


def test_batch_larger_than_a_workers_share_is_refused():
    config, spec = setup("sync", 8, b=16)  # 96 samples / 8 workers = 12 each < 16
    with pytest.raises(ConfigError, match="per-worker"):
        plan_global_steps(config, spec, 96)


# -- data order -------------------------------------------------------------------------


def test_streams_deal_out_each_ranks_distributed_sampler_shard():
    config = tiny_config(workers=3, global_batch_size=12)
    data = tiny_data()
    streams = make_streams(3, config, tiny_workload(), data, data.train_x, batches_per_epoch=8)
    for rank, stream in enumerate(streams):
        env = DistEnv(rank=rank, local_rank=rank, world_size=3, local_world_size=3)
        for epoch in range(2):
            shard = make_strategy(config, env).shard_indices(
                data.num_train, epoch, config.optimisation.seed
            )
            for batch in range(8):
                x, y = stream.next_batch()
                rows = shard[batch * 4 : (batch + 1) * 4]
                assert torch.equal(y, data.train_y[rows]) and torch.equal(x, data.train_x[rows])


# -- sync -------------------------------------------------------------------------------


def test_sync_with_one_worker_is_the_serial_trainer():
    config, spec = setup("sync", 1, b=16, steps=8)
    emulated = emulate(config, spec, tiny_workload(), tiny_data())
    serial_cfg = tiny_config(workers=1, global_batch_size=16, steps=8)
    serial = train(serial_cfg, tiny_workload(), tiny_data(), make_strategy(serial_cfg, DistEnv()))
    assert_same_parameters(emulated.model, serial.model)


# -- local SGD --------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [2, 3])
def test_local_sgd_with_one_local_step_equals_sync_sgd(workers):
    # SGD with Nesterov momentum and L2 weight decay: updates linear in the gradient, so the
    # mean of the replicas' updates is the update of the mean gradient.
    common = dict(b=8, steps=8, optimizer="sgd", lr=0.05, weight_decay=1e-3)
    local = run("local-sgd", workers, local_steps=1, **common)
    sync = run("sync", workers, **common)
    assert_same_parameters(local.model, sync.model)
    assert local.summary["emulation"]["local_steps"] == 1
    assert local.summary["emulation"]["averagings"] == 8


def test_local_sgd_of_one_worker_counts_no_averaging():
    one = run("local-sgd", 1, local_steps=2, b=8, steps=5, optimizer="sgd", lr=0.05)
    assert one.summary["emulation"]["averagings"] == 0  # nothing to average with


def test_local_sgd_with_more_local_steps_is_a_different_optimisation():
    common = dict(b=8, steps=6, optimizer="sgd", lr=0.05)
    local = run("local-sgd", 2, local_steps=3, **common)
    sync = run("sync", 2, **common)
    assert local.summary["emulation"]["averagings"] == 2
    assert max_difference(local.model, sync.model) > 1e-4


def test_local_sgd_replicas_are_equal_right_after_averaging_only():
    config, spec = setup("local-sgd", 2, local_steps=3, optimizer="sgd", lr=0.05)
    data = tiny_data()
    torch.manual_seed(0)
    model = tiny_workload().build_model({})
    streams = make_streams(2, config, tiny_workload(), data, data.train_x, batches_per_epoch=6)
    mode = LocalSGD(model, streams, tiny_workload(), config, total_steps=6, local_steps=3)
    for step in range(1, 7):
        mode.step()
        differ = max_difference(mode.replicas[0], mode.replicas[1])
        assert (differ == 0.0) == (step % 3 == 0), (step, differ)
        assert mode.in_sync == (step % 3 == 0)
    evaluated = mode.eval_model()
    assert max_difference(evaluated, mode.replicas[0]) == 0.0


# -- asynchronous SGD -------------------------------------------------------------------


def test_async_with_one_worker_is_plain_sgd():
    config, spec = setup("async", 1, b=8, steps=10, staleness_spread=0.5)
    emulated = emulate(config, spec, tiny_workload(), tiny_data())
    serial_cfg = tiny_config(workers=1, global_batch_size=8, steps=10)
    serial = train(serial_cfg, tiny_workload(), tiny_data(), make_strategy(serial_cfg, DistEnv()))
    assert_same_parameters(emulated.model, serial.model)
    staleness = emulated.summary["emulation"]["staleness"]
    assert staleness["mean"] == 0 and staleness["max"] == 0


@pytest.mark.parametrize("workers", [2, 4])
def test_async_staleness_with_equal_compute_times_is_n_minus_1(workers):
    steps = 48
    result = run("async", workers, b=8, steps=steps, staleness_spread=0.0, optimizer="sgd")
    staleness = result.summary["emulation"]["staleness"]
    # The first round arrives with staleness 0, 1, ..., N-1; every later gradient with N-1.
    expected = (workers * (workers - 1) / 2 + (steps - workers) * (workers - 1)) / steps
    assert staleness["mean"] == pytest.approx(expected)
    assert staleness["max"] == workers - 1
    assert staleness["num_updates"] == steps


def test_async_mean_staleness_tends_to_n_minus_1_whatever_the_spread():
    workers, steps = 4, 240
    result = run("async", workers, b=4, steps=steps, staleness_spread=0.6, optimizer="sgd")
    staleness = result.summary["emulation"]["staleness"]
    assert staleness["mean"] == pytest.approx(workers - 1, abs=0.15)
    assert staleness["max"] > workers - 1  # jitter lets fast workers lap slow ones


def test_async_is_different_from_sync_and_seeded():
    common = dict(b=8, steps=12, staleness_spread=0.3, optimizer="sgd", lr=0.05)
    a = run("async", 3, **common)
    b = run("async", 3, **common)
    assert_same_parameters(a.model, b.model, rtol=0, atol=0)
    assert a.summary["emulation"]["staleness"] == b.summary["emulation"]["staleness"]
    aware = run("async", 3, staleness_aware_lr=True, **common)
    assert max_difference(aware.model, a.model) > 1e-6


def test_compute_times_have_mean_one():
    import random

    rng = random.Random(0)
    draws = [compute_time(rng, 0.5) for _ in range(20000)]
    assert sum(draws) / len(draws) == pytest.approx(1.0, abs=0.02)
    assert compute_time(rng, 0.0) == 1.0


# -- the summary and the stored run ------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async", "local-sgd"])
def test_summary_holds_the_contract(mode):
    result = run(mode, 2, b=8, steps=12, eval_every=3, target_accuracy=0.01)
    summary = result.summary
    emulation = summary["emulation"]
    for key in (
        "mode",
        "workers",
        "global_batch_size",
        "per_worker_batch_size",
        "lr_scaling",
        "local_steps",
        "staleness",
        "steps_to_target",
        "samples_to_target",
        "target_accuracy",
    ):
        assert key in emulation, key
    assert emulation["mode"] == mode and emulation["workers"] == 2
    per_step = 8 if mode == "async" else 16
    assert emulation["global_batch_size"] == per_step
    # A target of 1% is reached at the first evaluation, after eval_every global steps.
    assert emulation["steps_to_target"] == 3
    assert emulation["samples_to_target"] == 3 * per_step
    assert summary["time_to_target_s"] == summary["accuracy_curve"][0][0]
    assert [point[0] for point in emulation["steps_curve"]][:4] == [3, 6, 9, 12]
    assert (emulation["staleness"] is not None) == (mode == "async")
    assert (emulation["local_steps"] is not None) == (mode == "local-sgd")
    assert summary["test_accuracy"] == emulation["steps_curve"][-1][2]
    assert summary["num_samples"] == 12 * per_step
    # 96 samples: 6 global steps an epoch for sync and local SGD (2 x 8 a step), 12 for async
    assert len(result.epochs) == (1 if mode == "async" else 2)
    assert result.epochs[-1]["test_accuracy"] == summary["test_accuracy"]


def test_stored_emulations_are_runs_with_one_hash_per_setting(store_path):
    with RunStore(store_path) as store:
        ids = []
        for workers in (1, 2):
            config, spec = setup("sync", workers, steps=3)
            config = config.with_(tag=emulation_tag("abc123"))
            outcome = emulate(config, spec, tiny_workload(), tiny_data())
            run_id = f"run{workers}"
            create_emulation_row(store, run_id, config, spec)
            complete_emulation(store, run_id, outcome)
            ids.append(run_id)
        records = [store.get_run(i) for i in ids]
        assert all(r.status == "completed" and r.world_size == 1 for r in records)
        assert all(r.data_kind == "real" and r.tag == "emulate:abc123" for r in records)
        assert [r.global_batch_size for r in records] == [8, 16]
        assert records[0].config_hash != records[1].config_hash
        assert records[1].config["emulation"]["workers"] == 2
        assert records[1].summary["emulation"]["workers"] == 2
        assert store.epochs(ids[1])[0]["test_accuracy"] is not None
        assert store.step_times(ids[1]) == []
