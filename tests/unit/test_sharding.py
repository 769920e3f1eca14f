"""Which samples each worker trains on, epoch by epoch and seed by seed."""

from __future__ import annotations

import torch

from trainscale.models.dbn_cd import PRETRAIN_EPOCHS_PER_LAYER, pretrain_epoch
from trainscale.parallel.sharding import Sharding


def test_each_epoch_is_a_permutation_split_into_disjoint_equal_shards():
    shards = [Sharding(rank, 3).shard_indices(10, epoch=1, seed=4) for rank in range(3)]
    assert {len(shard) for shard in shards} == {4}  # 10 padded to 12
    assert set(torch.cat(shards).tolist()) == set(range(10))


def test_runs_of_different_seeds_share_no_epoch_order():
    # With seed + epoch as the generator seed, seed 1's first epoch was seed 0's second:
    # a study over seeds trained its runs on the same orders shifted by one epoch.
    serial = Sharding()
    orders = {
        (seed, epoch): tuple(serial.shard_indices(50, epoch, seed).tolist())
        for seed in range(4)
        for epoch in range(4)
    }
    assert len(set(orders.values())) == len(orders)


def test_seed_zero_shuffles_epoch_e_from_e():
    # The orders of the default seed: runs stored before stay reproducible.
    expected = torch.randperm(20, generator=torch.Generator().manual_seed(3))
    assert torch.equal(Sharding().shard_indices(20, 3, 0), expected)


def test_pretraining_epochs_draw_orders_apart_from_fine_tuning_and_other_layers():
    numbers = [pretrain_epoch(layer, epoch) for layer in range(3) for epoch in range(5)]
    assert len(set(numbers)) == len(numbers)
    assert min(numbers) >= PRETRAIN_EPOCHS_PER_LAYER  # fine-tuning's epochs come first
    assert pretrain_epoch(0, PRETRAIN_EPOCHS_PER_LAYER - 1) < pretrain_epoch(1, 0)
