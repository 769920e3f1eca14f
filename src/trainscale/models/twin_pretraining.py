"""What a TensorFlow or JAX twin's pre-training phase gets from its framework's trainer.

A workload with a pre-training phase (mnist-dbn's greedy CD) declares it once per
framework, beside its twins: `KerasTwin.pretrain`, `FlaxTwin.pretrain`, as
`Workload.pretrain` is PyTorch's. The phase knows the workload (its settings, its
algorithm); the trainer knows the framework's processes. This is what the trainer hands
over: the data, the run, and the framework's way to shard, average and time across them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TwinPretraining:
    """The trainer's side of a twin's pre-training phase."""

    train_x: Any
    """Every training input, a numpy array (N, ...)."""
    config: Any
    """The run's RunConfig (its workload options configure the phase)."""
    local_batch: int
    """Rows this process feeds a step."""
    global_batch: int
    """Rows of a step over every process."""
    average: Callable[[Any], Any]
    """`average(flat)`: a flat array of this process's sums, summed over the processes and
    divided by the global batch."""
    order: Callable[[int, int, int], Any]
    """`order(num_rows, epoch, seed)`: this process's shard of the rows for an epoch, in the
    PyTorch trainer's order (a numpy array of row indices)."""
    rank: int
    """This process's rank (its own random draws)."""
    slowest: Callable[[float], float]
    """This process's seconds as the slowest process's (identity when serial)."""
    progress: Any
    """The run's progress sink: `progress.log(line)`."""
