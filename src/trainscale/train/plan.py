"""How many optimizer steps a run takes, and the check that a worker's shard holds a batch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainscale.config.options import RunConfig
from trainscale.errors import ConfigError


@dataclass(frozen=True)
class StepPlan:
    """The steps the training loop takes: `steps_per_epoch` a full epoch, `total_steps` in
    all (the last epoch may be partial)."""

    steps_per_epoch: int
    total_steps: int

    @property
    def num_epochs(self) -> int:
        """Epochs the loop runs, the last one partial when the steps do not fill it."""
        return math.ceil(self.total_steps / self.steps_per_epoch)


def worker_shard(num_train: int, world_size: int) -> int:
    """Training samples in one worker's shard (the shards are equal; the last is padded)."""
    return -(-num_train // world_size)


def check_batch_fits(
    batch_size: int,
    num_train: int,
    world_size: int,
    advice: str | None = None,
) -> None:
    """ConfigError unless a worker's shard holds at least one full batch: partial batches
    are dropped, so a larger batch would give an epoch of no steps at all.

    The parent calls it with the dataset size it found before any worker starts; the
    trainer's `plan_steps` applies the same rule to the data it loaded.
    """
    shard = worker_shard(num_train, world_size)
    if batch_size > shard:
        over = f" over {world_size} workers" if world_size > 1 else ""
        if advice is None:
            fewer = " or fewer workers" if world_size > 1 else ""
            advice = f"use --batch-size {shard} or less (per worker){fewer}"
        raise ConfigError(
            f"per-worker batch size {batch_size} is larger than a worker's share of the "
            f"training set ({shard} of {num_train} samples{over}); {advice}"
        )


def plan_steps(config: RunConfig, num_train: int, world_size: int) -> StepPlan:
    """A worker's steps per epoch and the run's total steps. Partial last batches are
    dropped, as with drop_last; `--steps` overrides `--epochs`."""
    check_batch_fits(config.optimisation.batch_size, num_train, world_size)
    steps_per_epoch = worker_shard(num_train, world_size) // config.optimisation.batch_size
    return StepPlan(steps_per_epoch, total_for(config, steps_per_epoch))


def total_for(config: RunConfig, steps_per_epoch: int) -> int:
    """Total steps: `--steps` if given, else `--epochs` x `steps_per_epoch` (at least 1)."""
    return config.optimisation.steps or max(
        1, math.ceil(config.optimisation.epochs * steps_per_epoch)
    )
