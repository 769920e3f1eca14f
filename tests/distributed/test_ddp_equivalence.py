"""Two gloo workers on 127.0.0.1 train exactly like one process at the same global batch."""

from __future__ import annotations

import pytest
import torch

from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.launcher import launch_workers
from trainscale.parallel.strategy import make_strategy
from trainscale.train.trainer import train

from tests.distributed.ddp_equivalence_worker import train_and_return_state, train_norm_drop
from tests.helpers.tiny import tiny_config, tiny_data, tiny_workload


@pytest.mark.parametrize("grad_accum", [1, 2])
def test_two_worker_ddp_matches_serial_at_same_global_batch(grad_accum):
    steps = 6  # 96 samples / global batch 16 = one epoch, and the epoch-1 reshuffle after it
    serial_cfg = tiny_config(workers=1, global_batch_size=16, steps=steps)
    # With accumulation each worker's 8 samples are two micro-batches of 4, and only the
    # second all-reduces (no_sync): the update must still be the global batch's.
    ddp_cfg = tiny_config(
        workers=2, global_batch_size=16, steps=steps, grad_accum=grad_accum, breakdown_every=2
    )
    serial = train(serial_cfg, tiny_workload(), tiny_data(), make_strategy(serial_cfg, DistEnv()))

    results = launch_workers(train_and_return_state, (ddp_cfg.flat(),), 2)

    assert set(results) == {0, 1}
    for rank in (0, 1):
        state = results[rank]["state"]
        for name, value in serial.model.state_dict().items():
            torch.testing.assert_close(
                state[name],
                value,
                rtol=1e-4,
                atol=1e-5,
                msg=f"rank {rank} parameter {name} differs from serial",
            )
        # The epoch's training loss is the global batch's, as serially: every rank's samples.
        assert results[rank]["epochs"][0]["train_loss"] == pytest.approx(
            serial.epochs[0]["train_loss"], rel=1e-5
        )
    # Slowest-rank rule: the run's step times are the same on both ranks (they are gathered).
    assert results[0]["step_times"] == results[1]["step_times"]
    assert len(results[0]["step_times"]) == steps
    # Same global batch, same samples: the throughput counts global samples.
    assert results[0]["summary"]["num_samples"] == steps * 16
    # Sampled steps record where the time went, exposed communication included (DDP hook).
    breakdown = results[0]["summary"]["breakdown_s"]
    assert results[0]["summary"]["breakdown_sampled_steps"] == 3  # steps 1, 3, 5 after warm-up
    assert set(breakdown) == {"data", "forward", "backward", "optimizer", "exposed_comm"}
    assert breakdown["exposed_comm"] is not None and breakdown["exposed_comm"] >= 0
    assert all(breakdown[p] >= 0 for p in ("data", "forward", "backward", "optimizer"))


def test_workers_draw_their_own_dropout_and_are_scored_as_rank_0s_model():
    config = tiny_config(workers=2, global_batch_size=16, steps=3)
    results = launch_workers(train_norm_drop, (config.flat(),), 2)
    # Dropout: where both ranks' inputs were live, independent masks of p = 0.5 agree about
    # half the time; ranks that drew from the same stream agreed everywhere.
    live = results[0]["live"] & results[1]["live"]
    agree = (results[0]["kept"] == results[1]["kept"])[live].double().mean().item()
    assert live.sum() > 100 and agree < 0.75
    # Batch norm: every rank ends with rank 0's running statistics, and the stored test loss
    # is that model's, not a mix of the ranks' drifted statistics.
    for name, value in results[0]["buffers"].items():
        torch.testing.assert_close(results[1]["buffers"][name], value, msg=name)
    assert results[0]["test_loss"] == pytest.approx(results[0]["own_test_loss"], rel=1e-6)


def test_sharding_covers_the_global_batch_disjointly():
    cfg = tiny_config(workers=2)
    shards = [
        make_strategy(
            cfg, DistEnv(rank=r, local_rank=r, world_size=2, local_world_size=2)
        ).shard_indices(10, epoch=3, seed=1)
        for r in (0, 1)
    ]
    assert len(shards[0]) == len(shards[1]) == 5
    assert sorted(torch.cat(shards).tolist()) == list(range(10))
    odd = [
        make_strategy(
            cfg, DistEnv(rank=r, local_rank=r, world_size=2, local_world_size=2)
        ).shard_indices(9, epoch=0, seed=1)
        for r in (0, 1)
    ]
    assert len(odd[0]) == len(odd[1]) == 5  # padded to equal length, as DistributedSampler
    assert set(torch.cat(odd).tolist()) == set(range(9))
