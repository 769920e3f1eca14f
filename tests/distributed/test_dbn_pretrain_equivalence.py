"""Data-parallel CD pre-training: averaged updates over 2 gloo workers equal a serial run.

CD is not a loss gradient, so DDP does not average it; the pre-training phase sums each
worker's CD statistics with one all-reduce and divides by the global batch. With mean-field
CD (no Bernoulli sampling) the two workers must end where one process ends at the same global
batch. With sampling on, each worker draws its own samples, so that comparison holds only in
distribution; the replicas must still stay identical to each other.
"""

from __future__ import annotations

import dataclasses

import torch

from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.launcher import launch_workers
from trainscale.parallel.strategy import make_strategy
from trainscale.workloads.dbn_pretrain import CdSettings, pretrain_stack

from tests.distributed.dbn_pretrain_worker import dataset, pretrain_and_return_state, small_dbn
from tests.helpers.tiny import tiny_config

GLOBAL_BATCH = 16  # 96 samples: 6 steps per epoch, 8 samples per worker per step


def test_two_worker_cd_pretraining_matches_serial_at_same_global_batch():
    # Two epochs: the momentum switch and the per-epoch reshuffle are both exercised; k=2
    # and two layers: the negative chain and the propagation between layers too.
    settings = CdSettings(epochs=2, lr=0.5, k=2, sample=False, seed=3)
    serial_cfg = tiny_config(workers=1)
    serial_model = small_dbn()
    serial = pretrain_stack(
        serial_model, dataset(), make_strategy(serial_cfg, DistEnv()), settings, GLOBAL_BATCH
    )

    ddp_cfg = tiny_config(workers=2)
    results = launch_workers(
        pretrain_and_return_state,
        (ddp_cfg.flat(), dataclasses.asdict(settings), GLOBAL_BATCH // 2),
        2,
    )

    assert set(results) == {0, 1}
    initial = small_dbn().state_dict()
    for name, value in serial_model.state_dict().items():
        if name.startswith("rbms."):  # pre-training moved every RBM tensor
            assert not torch.allclose(value, initial[name]), name
        for rank in (0, 1):
            torch.testing.assert_close(
                results[rank]["state"][name],
                value,
                rtol=1e-5,
                atol=1e-6,
                msg=f"rank {rank} {name} differs from serial",
            )
    for rank in (0, 1):
        figures = results[rank]["figures"]
        assert figures["global_batch_size"] == GLOBAL_BATCH
        for mine, theirs in zip(figures["layers"], serial["layers"], strict=True):
            assert mine["num_steps"] == theirs["num_steps"] == 2 * 96 // GLOBAL_BATCH
            # The reconstruction error rides in the same all-reduce: a global figure.
            assert abs(mine["reconstruction_error"] - theirs["reconstruction_error"]) < 1e-6


def test_two_workers_with_sampling_and_persistent_chains_stay_in_lockstep():
    settings = CdSettings(epochs=1, lr=0.5, k=1, persistent=True, sample=True, seed=0)
    results = launch_workers(
        pretrain_and_return_state,
        (tiny_config(workers=2).flat(), dataclasses.asdict(settings), GLOBAL_BATCH // 2),
        2,
    )
    # Different samples on each worker, one averaged update: identical replicas, bit for bit.
    for name, value in results[0]["state"].items():
        assert torch.equal(value, results[1]["state"][name]), name
    # Reconstruction errors ride in the update's all-reduce, times are the slowest worker's.
    assert results[0]["figures"] == results[1]["figures"]
    assert [lay["num_steps"] for lay in results[0]["figures"]["layers"]] == [6, 6]
