"""The TensorFlow trainer: every workload trains a step through `train`, a learnable problem
is learnt, and the optimizer, lr schedule, loss and input layout are exactly PyTorch's."""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import pytest
import torch

tf = pytest.importorskip("tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from trainscale.data.augment import random_crop_flip  # noqa: E402
from trainscale.data.tensors import DataRequest  # noqa: E402
from trainscale.frameworks.tensorflow.inputs import to_model, training_layout  # noqa: E402
from trainscale.frameworks.tensorflow.optim import (  # noqa: E402
    TorchOptimizer,
    hyper_parameters,
    torch_schedule,
)
from trainscale.frameworks.tensorflow.step import per_example_loss  # noqa: E402
from trainscale.frameworks.tensorflow.trainer import train  # noqa: E402
from trainscale.parallel.distenv import DistEnv  # noqa: E402
from trainscale.parallel.sharding import Sharding  # noqa: E402
from trainscale.parallel.strategy import make_strategy  # noqa: E402
from trainscale.train.batches import WorkerBatches  # noqa: E402
from trainscale.train.lr import make_optimizer, make_scheduler  # noqa: E402
from trainscale.workloads import get_workload  # noqa: E402

from tests.helpers.tf_tiny import fix_tensorflow_threads, learnable_digits, tf_config  # noqa: E402

fix_tensorflow_threads()

WORKLOADS = [
    "mnist-cnn",
    "mnist-dbn",
    "imdb-bilstm",
    "imdb-bigru",
    "cifar10-resnet44",
    "tweets-text",
]
# Tiny variants: the smallest DBN, one CD epoch; everything else at its real shapes.
OPTIONS = {"mnist-dbn": {"layers": "16,8", "pretrain_epochs": "1"}}


def _run(config, workload, data):
    strategy = make_strategy(config, DistEnv())
    strategy.setup()
    try:
        return train(config, workload, data, strategy)
    finally:
        strategy.teardown()


@pytest.mark.parametrize("name", WORKLOADS)
def test_every_workload_trains_serially_through_train(name):
    workload = get_workload(name)
    options = OPTIONS.get(name, {})
    request = DataRequest(options=options, seed=0, max_train=32, max_test=20)
    # Marked real so the evaluator runs too (nothing is claimed from random data).
    data = workload.make_synthetic(request)
    data = dataclasses.replace(data, kind="real")
    config = tf_config(name, batch_size=8, steps=2, workload_options=options)

    outcome = _run(config, workload, data)

    summary = outcome.summary
    assert summary["num_steps"] == 2 and summary["num_samples"] == 16
    assert all(math.isfinite(epoch["train_loss"]) for epoch in outcome.epochs)
    assert 0.0 <= summary["test_accuracy"] <= 1.0 and math.isfinite(summary["test_loss"])
    assert summary["compile_time_s"] > 0  # the step was traced before the first one
    assert summary["flops_per_sample"] > 0  # counted on the torch twin
    (worker,) = outcome.workers
    assert worker["tf_strategy"] == "default (serial)"
    assert worker["tf_intra_op_threads"] == 1 and worker["tf_inter_op_threads"] == 1
    if name == "mnist-dbn":
        # CD pre-training ran first, on the training clock.
        assert outcome.pretrain and summary["pretrain_time_s"] > 0
        assert summary["train_time_s"] >= summary["pretrain_time_s"]
    else:
        assert summary["pretrain_time_s"] is None


def test_a_learnable_problem_is_learnt():
    config = tf_config(batch_size=32, epochs=3, optimizer="adam", lr=3e-3)

    outcome = _run(config, get_workload("mnist-cnn"), learnable_digits(256, 100))

    losses = [epoch["train_loss"] for epoch in outcome.epochs]
    assert len(losses) == 3 and losses[-1] < 0.5 * losses[0], losses
    assert outcome.summary["test_accuracy"] >= 0.9, outcome.summary["test_accuracy"]
    assert outcome.summary["test_macro_f1"] >= 0.85
    assert len(outcome.summary["accuracy_curve"]) >= 3  # evaluated every epoch, off the clock


@pytest.mark.parametrize(
    ("optimizer", "schedule", "nesterov", "weight_decay"),
    [
        ("sgd", "onecycle", True, 1e-2),  # OneCycleLR also cycles the momentum
        ("sgd", "step", False, 1e-2),
        ("adam", "onecycle", True, 1e-2),  # L2 in the gradient; beta1 cycled
        ("adamw", "cosine", True, 5e-2),  # decoupled decay
    ],
)
def test_the_optimizer_and_lr_schedule_equal_torchs_step_by_step(
    optimizer, schedule, nesterov, weight_decay
):
    steps = 12
    config = tf_config(
        optimizer=optimizer,
        lr=0.1 if optimizer == "sgd" else 0.01,
        schedule=schedule,
        warmup_fraction=0.25,
        weight_decay=weight_decay,
    ).with_(momentum=0.9, nesterov=nesterov)
    opt = config.optimisation
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(5, 3, generator=generator)
    grads = [torch.randn(5, 3, generator=generator) for _ in range(steps)]

    reference = start.clone().requires_grad_(True)
    torch_opt = make_optimizer(
        opt.optimizer, [reference], opt.lr, opt.momentum, opt.weight_decay, nesterov=opt.nesterov
    )
    scheduler = make_scheduler(torch_opt, steps, opt.schedule, opt.warmup_fraction)
    schedule_ = torch_schedule(opt, steps)
    variable = tf.Variable(start.numpy())
    ours = TorchOptimizer(opt, [variable], schedule_.nesterov)
    for step, grad in enumerate(grads):
        assert schedule_.lr[step] == pytest.approx(torch_opt.param_groups[0]["lr"], rel=1e-12)
        reference.grad = grad.clone()
        torch_opt.step()
        scheduler.step()
        hyper = tf.constant(hyper_parameters(schedule_, opt, step))
        ours.update(variable, tf.constant(grad.numpy()), ours.slots[0], hyper)
        np.testing.assert_allclose(
            variable.numpy(), reference.detach().numpy(), rtol=1e-5, atol=1e-6
        )
    # The run moved far from where it started: the comparison is not of standing still.
    assert not np.allclose(variable.numpy(), start.numpy(), atol=1e-2)


def test_label_smoothing_is_torchs():
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 4, generator=generator)
    labels = torch.randint(0, 4, (6,), generator=generator)
    for smoothing in (0.0, 0.1):
        expected = torch.nn.functional.cross_entropy(logits, labels, label_smoothing=smoothing)
        got = tf.reduce_mean(
            per_example_loss(tf.constant(logits.numpy()), tf.constant(labels.numpy()), smoothing)
        )
        assert float(got) == pytest.approx(float(expected), rel=1e-5)


def test_augmented_image_batches_reach_the_model_as_nhwc():
    """cifar10-resnet44's crop-and-flip works on the converted set: the batch the model gets
    is the NCHW batch's augmentation, transposed to NHWC."""
    config = tf_config("cifar10-resnet44", batch_size=8)
    workload = get_workload("cifar10-resnet44")
    data = workload.make_synthetic(DataRequest(max_train=32, max_test=8))
    sharding = Sharding(0, 1)
    converted = WorkerBatches(config, workload, data, training_layout(data.train_x), sharding)
    original = WorkerBatches(config, workload, data, data.train_x, sharding)
    order = converted.epoch_order(0)

    x, y = converted.batch(order, 1)
    expected_x, expected_y = original.batch(order, 1)

    nhwc = to_model(x)
    assert nhwc.shape == (8, 32, 32, 3) and nhwc.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(nhwc, expected_x.permute(0, 2, 3, 1).numpy())
    assert torch.equal(y, expected_y)
    # Augmented indeed: a crop moved the pixels of at least one image.
    plain = data.train_x[order[8:16]].permute(0, 2, 3, 1).numpy()
    assert not np.array_equal(nhwc, plain)
    assert random_crop_flip is workload.augment


def test_bf16_computes_in_bfloat16_with_float32_weights():
    config = tf_config(batch_size=8, steps=2, precision="bf16")

    outcome = _run(config, get_workload("mnist-cnn"), learnable_digits(32, 20))

    model = outcome.model
    assert model.dtype_policy.name == "mixed_bfloat16"
    assert all(variable.dtype == "float32" for variable in model.weights)
    assert all(math.isfinite(epoch["train_loss"]) for epoch in outcome.epochs)
    # The policy was the model's only: the next model is built in float32 again.
    import keras

    assert keras.mixed_precision.global_policy().name == "float32"
