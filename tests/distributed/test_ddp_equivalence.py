"""Two gloo workers on 127.0.0.1 train exactly like one process at the same global batch."""

from __future__ import annotations

import pytest
import torch

from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.launcher import launch_workers
from trainscale.parallel.strategy import make_strategy
from trainscale.train.trainer import train

from tests.distributed.ddp_equivalence_worker import train_and_return_state
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
