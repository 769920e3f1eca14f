"""Tiny MNIST-shaped data and resolved configs for the TensorFlow trainer's tests."""

from __future__ import annotations

import torch

from trainscale.config.options import RunConfig, RunOptions
from trainscale.data.tensors import TensorData
from trainscale.runner.resolve import resolve


def tf_config(workload: str = "mnist-cnn", **changes: object) -> RunConfig:
    """A resolved TensorFlow run of `workload`, one thread per worker, nothing pinned;
    changes are RunOptions fields."""
    options: dict[str, object] = dict(
        workload=workload,
        framework="tensorflow",
        threads_per_worker=1,
        affinity="none",
        warmup_steps_untimed=1,
        allow_oversubscribe=True,
        # Tests compare numbers across settings: fp32 on every machine, where auto would
        # train in bf16 on CPUs that compute it natively.
        precision="fp32",
    )
    options.update(changes)
    return resolve(RunOptions.from_flat(options))


def learnable_digits(num_train: int = 256, num_test: int = 100, seed: int = 0) -> TensorData:
    """28x28 images whose class (0-9) is the row of a bright bar, under noise: a problem a
    CNN learns in a few dozen steps. Marked real so that the evaluation runs (no claim is
    ever made from it)."""
    generator = torch.Generator().manual_seed(seed)

    def images(count: int) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.randint(0, 10, (count,), generator=generator)
        x = 0.3 * torch.randn(count, 1, 28, 28, generator=generator)
        for index, label in enumerate(labels.tolist()):
            x[index, 0, 2 + 2 * label : 4 + 2 * label, 4:24] += 2.0
        return x, labels

    train_x, train_y = images(num_train)
    test_x, test_y = images(num_test)
    return TensorData(
        train_x=train_x,
        train_y=train_y,
        test_x=test_x,
        test_y=test_y,
        kind="real",
        source="tests: bars on noise",
        meta={"num_classes": 10},
    )


def fix_tensorflow_threads() -> None:
    """Start TensorFlow's runtime in this test process with the pools every in-process
    TensorFlow test trains with (1 intra-op, 1 inter-op thread: `tf_config`'s plan).

    TensorFlow fixes its pools once per process; a test module that uses TensorFlow first
    would otherwise start it with TensorFlow's defaults, and the trainer (which sets the
    plan's counts, as every fresh worker process does) would find them fixed.
    """
    import tensorflow as tf

    if tf.config.threading.get_intra_op_parallelism_threads() == 1:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # already started with other pools: the tests will say so
        pass
