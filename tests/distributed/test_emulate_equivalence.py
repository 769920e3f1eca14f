"""Sync emulation of 2 workers in one process ends where a real 2-worker DDP run ends."""

from __future__ import annotations

import pytest
import torch

from trainscale.config import RunOptions
from trainscale.emulation.engine import emulate
from trainscale.emulation.spec import EmulationSpec, emulation_config, resolve_spec
from trainscale.parallel.launcher import launch_workers

from tests.distributed.ddp_equivalence_worker import train_and_return_state
from tests.helpers.tiny import tiny_config, tiny_data, tiny_workload


def test_sync_emulation_of_two_workers_matches_two_worker_ddp():
    # Linear lr scaling, so the lr rule is part of what must match (16 vs the reference 64).
    lr_scaling = "linear"
    steps = 12  # two epochs of 96 samples at 16 a step: the epoch-1 reshuffle is covered
    ddp_cfg = tiny_config(
        workers=2, batch_size=8, global_batch_size=None, steps=steps, lr_scaling=lr_scaling
    )
    spec = resolve_spec(EmulationSpec("sync", workers=2, per_worker_batch_size=8), 64)
    options = RunOptions.of(
        workload="mnist-cnn",
        threads_per_worker=1,
        affinity="none",
        steps=steps,
        lr_scaling=lr_scaling,
        warmup_steps_untimed=1,
        precision="fp32",  # as tiny_config's: compared number for number
    )
    emu_cfg = emulation_config(options, spec, locate_data=False).with_(channels_last=False)
    # The same optimisation as the real run: lr scaled to the same global batch, same
    # warm-up, same schedule, same seed.
    assert (
        emu_cfg.optimisation.lr == pytest.approx(ddp_cfg.optimisation.lr)
        and emu_cfg.optimisation.lr != emu_cfg.optimisation.base_lr
    )
    assert emu_cfg.optimisation.warmup_fraction == ddp_cfg.optimisation.warmup_fraction
    assert (
        emu_cfg.optimisation.optimizer,
        emu_cfg.optimisation.schedule,
        emu_cfg.optimisation.seed,
    ) == (
        ddp_cfg.optimisation.optimizer,
        ddp_cfg.optimisation.schedule,
        ddp_cfg.optimisation.seed,
    )

    emulated = emulate(emu_cfg, spec, tiny_workload(), tiny_data())
    results = launch_workers(train_and_return_state, (ddp_cfg.flat(),), 2)

    assert emulated.summary["num_steps"] == steps == len(results[0]["step_times"])
    for rank in (0, 1):
        state = results[rank]["state"]
        for name, value in emulated.model.state_dict().items():
            torch.testing.assert_close(
                value,
                state[name],
                rtol=1e-4,
                atol=1e-5,
                msg=f"DDP rank {rank} parameter {name} differs from the sync emulation",
            )
    # Both evaluate the same model on the same test set at the end.
    assert emulated.summary["test_accuracy"] == pytest.approx(
        results[0]["summary"]["test_accuracy"]
    )
