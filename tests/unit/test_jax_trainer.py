"""The JAX trainer serially: every workload trains, the optimizer is PyTorch's step for
step, the lr schedule is torch's, a learnable problem is learnt, and inputs reach the flax
models in their layouts."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

from trainscale.config.options import RunConfig, RunOptions  # noqa: E402
from trainscale.data.augment import random_crop_flip  # noqa: E402
from trainscale.data.tensors import DataRequest, TensorData  # noqa: E402
from trainscale.frameworks.jax.inputs import bucket_width, nhwc_augment  # noqa: E402
from trainscale.frameworks.jax.optim import make_optax, torch_schedule  # noqa: E402
from trainscale.frameworks.jax.trainer import train as jax_train  # noqa: E402
from trainscale.parallel.distenv import DistEnv  # noqa: E402
from trainscale.parallel.strategy import make_strategy  # noqa: E402
from trainscale.runner.resolve import resolve  # noqa: E402
from trainscale.train.lr import make_optimisation  # noqa: E402
from trainscale.train.trainer import train as torch_train  # noqa: E402
from trainscale.workloads import JAX, get_workload  # noqa: E402

TEXT = {"max_len": "40", "vocab_size": "300"}
OPTIONS = {
    "mnist-cnn": {},
    "mnist-dbn": {"layers": "16,8", "pretrain_epochs": "1"},
    "imdb-bilstm": TEXT,
    "imdb-bigru": TEXT,
    "cifar10-resnet44": {},
    "tweets-text": TEXT,
}
TINY_DBN = {"layers": "12", "pretrain_epochs": "0"}


def jax_config(workload: str, options: dict[str, str], **changes: object) -> RunConfig:
    """A resolved serial JAX run of `workload`; `changes` are RunConfig flat fields."""
    resolved = resolve(
        RunOptions.from_flat(
            {
                "workload": workload,
                "framework": "jax",
                "data": "synthetic",
                "workload_options": options,
                "threads_per_worker": 1,
                "affinity": "none",
                "allow_oversubscribe": True,
                "warmup_steps_untimed": 0,
            }
        )
    )
    return resolved.with_(**changes) if changes else resolved


def tiny_data(workload: str, options: dict[str, str], num_train: int, num_test: int = 20):
    """The workload's synthetic data, few samples, marked real so evaluation runs (never a
    real claim: tests only)."""
    request = DataRequest(options=options, seed=0, max_train=num_train, max_test=num_test)
    data = get_workload(workload).make_synthetic(request)
    return dataclasses.replace(data, kind="real")


def serial(config: RunConfig):
    strategy = make_strategy(config, DistEnv())
    strategy.setup()
    return strategy


def torch_twin_variables(workload: str, data: TensorData, seed: int = 0):
    """The flax variables of the seeded torch twin: the weights training starts from."""
    torch.manual_seed(seed)
    model = get_workload(workload).build_model(data.meta)
    twin = get_workload(workload).build_model(data.meta, JAX)
    x = data.train_x[:2]
    if x.dim() == 4:
        x = x.permute(0, 2, 3, 1).contiguous()
    sample = x.numpy() if x.is_floating_point() else x.to(torch.int32).numpy()
    return twin.variables_from_torch(twin.module(jnp.float32), model, sample)


def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize(
    ("workload", "precision"),
    [(name, "fp32") for name in OPTIONS] + [("mnist-cnn", "bf16")],
)
def test_one_step_of_every_workload(workload, precision):
    options = OPTIONS[workload]
    config = jax_config(workload, options, batch_size=8, global_batch_size=8, steps=1)
    config = config.with_(precision=precision)
    data = tiny_data(workload, options, num_train=32)

    outcome = jax_train(config, get_workload(workload), data, serial(config))

    summary = outcome.summary
    assert summary["num_steps"] == 1 and summary["num_samples"] == 8
    assert math.isfinite(outcome.epochs[0]["train_loss"])
    assert 0.0 <= summary["test_accuracy"] <= 1.0 and math.isfinite(summary["test_loss"])
    assert summary["compile_time_s"] > 0
    assert summary["flops_per_sample"] > 0
    worker = outcome.workers[0]
    assert worker["jax_distribution"] == "serial, 1 device"
    assert worker["jax_threads"] >= 1
    assert worker["jax_compiles_in_training"] == 0  # one batch, compiled before the step
    # The step moved the weights away from the torch twin's.
    start = leaves(torch_twin_variables(workload, data)["params"])
    trained = leaves(outcome.model.variables["params"])
    assert any(not np.allclose(a, b) for a, b in zip(start, trained, strict=True))
    if workload == "mnist-dbn":
        layers = outcome.pretrain["layers"]
        assert [layer["hidden"] for layer in layers] == [16, 8]
        assert summary["pretrain_time_s"] > 0
        assert summary["train_time_s"] >= summary["pretrain_time_s"]


@pytest.mark.parametrize(
    "recipe",
    [
        # SGD, Nesterov momentum cycled by OneCycleLR, L2 decay, label smoothing.
        dict(optimizer="sgd", lr=0.2, momentum=0.9, nesterov=True, weight_decay=1e-3,
             label_smoothing=0.1, schedule="onecycle"),
        # Adam with L2 decay; OneCycleLR cycles beta1.
        dict(optimizer="adam", lr=5e-3, weight_decay=1e-3, schedule="onecycle",
             warmup_fraction=0.3),
        # AdamW's decoupled decay, cosine after a linear warm-up.
        dict(optimizer="adamw", lr=5e-3, weight_decay=0.05, schedule="cosine",
             warmup_fraction=0.2),
    ],
    ids=["sgd-nesterov", "adam-l2", "adamw"],
)  # fmt: skip
def test_jax_training_matches_pytorch_step_for_step(recipe):
    # A deterministic model (no dropout, no pre-training): both frameworks take the same
    # batches from the same start, so after 12 steps the weights must agree.
    config = jax_config("mnist-dbn", TINY_DBN, batch_size=16, global_batch_size=16, steps=12)
    config = config.with_(**recipe)
    data = tiny_data("mnist-dbn", TINY_DBN, num_train=96)
    workload = get_workload("mnist-dbn")

    in_jax = jax_train(config, workload, data, serial(config))
    pytorch = config.with_(framework="pytorch")
    in_torch = torch_train(pytorch, workload, data, serial(pytorch))

    twin = workload.build_model(data.meta, JAX)
    sample = data.train_x[:2].numpy()
    expected = twin.variables_from_torch(twin.module(jnp.float32), in_torch.model, sample)
    got = in_jax.model.variables["params"]
    flat_expected = jax.tree_util.tree_flatten_with_path(expected["params"])[0]
    flat_got = dict(jax.tree_util.tree_flatten_with_path(got)[0])
    for path, value in flat_expected:
        np.testing.assert_allclose(
            np.asarray(flat_got[path]),
            value,
            rtol=2e-4,
            atol=2e-6,
            err_msg=f"{jax.tree_util.keystr(path)} differs from PyTorch's",
        )
    for jax_epoch, torch_epoch in zip(in_jax.epochs, in_torch.epochs, strict=True):
        assert jax_epoch["train_loss"] == pytest.approx(torch_epoch["train_loss"], rel=1e-4)


@pytest.mark.parametrize(
    ("optimizer", "schedule", "warmup"),
    [("sgd", "onecycle", 0.25), ("adam", "onecycle", 0.1), ("adamw", "cosine", 0.2),
     ("sgd", "step", 0.0), ("adam", "constant", 0.5), ("sgd", "onecycle", 0.3)],
)  # fmt: skip
def test_lr_and_momentum_of_every_step_are_torchs(optimizer, schedule, warmup):
    steps = 23 if warmup != 0.3 else 7  # 7 < 10: the plain one-cycle factor, not OneCycleLR
    config = jax_config("mnist-dbn", TINY_DBN).with_(
        optimizer=optimizer, schedule=schedule, warmup_fraction=warmup, lr=0.1
    )
    opt = config.optimisation
    # torch: the trainer's own optimizer and scheduler on a real model, stepped for real.
    model = torch.nn.Linear(3, 2)
    torch_optimizer, scheduler = make_optimisation(model, config, steps)
    expected_lr, expected_momentum = [], []
    for _ in range(steps):
        model(torch.ones(1, 3)).sum().backward()
        group = torch_optimizer.param_groups[0]
        expected_lr.append(group["lr"])
        expected_momentum.append(group["betas"][0] if "betas" in group else group["momentum"])
        torch_optimizer.step()
        scheduler.step()
    # optax: the hyper-parameters it injects at each update.
    tx = make_optax(opt, torch_schedule(opt, steps))
    params = {"w": jax.numpy.ones(3)}
    state = tx.init(params)
    got_lr, got_momentum = [], []
    momentum_name = "momentum" if optimizer == "sgd" else "b1"
    for _ in range(steps):
        _, state = tx.update({"w": jax.numpy.ones(3)}, state, params)
        got_lr.append(float(state.hyperparams["learning_rate"]))
        got_momentum.append(float(state.hyperparams[momentum_name]))
    np.testing.assert_allclose(got_lr, expected_lr, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(got_momentum, expected_momentum, rtol=1e-6)
    assert len(set(np.round(expected_lr, 12))) > 1 or schedule == "constant"


def test_loss_falls_and_accuracy_rises_on_a_learnable_problem():
    # Class 1 images have a brighter left half, class 0 a brighter right half: noisy, but
    # a linear rule separates them.
    generator = torch.Generator().manual_seed(3)

    def images(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 2, (n,), generator=generator)
        x = torch.rand(n, 28, 28, generator=generator) * 0.8
        x[:, :, :14] += 0.2 * y[:, None, None]
        x[:, :, 14:] += 0.2 * (1 - y)[:, None, None]
        return x.view(n, 784), y

    (train_x, train_y), (test_x, test_y) = images(512), images(200)
    options = {"layers": "32", "pretrain_epochs": "0"}
    base = tiny_data("mnist-dbn", options, num_train=8)
    data = dataclasses.replace(base, train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y)
    config = jax_config("mnist-dbn", options).with_(
        batch_size=32, global_batch_size=32, epochs=4.0, steps=None, optimizer="adam",
        lr=0.01, schedule="constant", warmup_fraction=0.0,
    )  # fmt: skip

    outcome = jax_train(config, get_workload("mnist-dbn"), data, serial(config))

    losses = [epoch["train_loss"] for epoch in outcome.epochs]
    assert len(losses) == 4
    assert losses[-1] < 0.6 * losses[0], losses
    assert outcome.summary["test_accuracy"] > 0.8


def test_augmentation_of_nhwc_batches_is_the_nchw_one():
    x = torch.randn(6, 3, 8, 8)
    expected = random_crop_flip(x, torch.Generator().manual_seed(5))
    nhwc = x.permute(0, 2, 3, 1).contiguous()

    got = nhwc_augment(random_crop_flip)(nhwc, torch.Generator().manual_seed(5))

    assert got.shape == (6, 8, 8, 3) and got.is_contiguous()
    torch.testing.assert_close(got, expected.permute(0, 2, 3, 1), rtol=0, atol=0)


def test_text_widths_fall_into_a_few_buckets():
    widths = [bucket_width(length, 400) for length in range(1, 401)]
    assert widths[:16] == [16] * 16 and bucket_width(17, 400) == 24
    assert sorted(set(widths)) == [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 400]
    for length, width in zip(range(1, 401), widths, strict=True):
        assert length <= width <= max(16, math.ceil(length * 1.5))
    assert bucket_width(30, 20) == 20  # never wider than the data
