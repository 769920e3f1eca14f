"""The mnist-dbn workload: RBM maths, weight sharing, CD pre-training and its options."""

from __future__ import annotations

import pytest
import torch

from trainscale.data.tensors import DataRequest
from trainscale.errors import ConfigError
from trainscale.models.dbn import DeepBeliefNet, Rbm
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.train.trainer import train
from trainscale.workloads import get_workload
from trainscale.workloads.dbn_pretrain import (
    CdSettings,
    cd_statistics,
    pretrain_stack,
    train_rbm,
)
from trainscale.workloads.mnist_dbn import DbnOptions, images_to_tensor, parse_options

from tests.helpers.tiny import tiny_config


def serial_strategy():
    config = tiny_config(workers=1)
    return make_strategy(config, DistEnv())


def patterns(num_copies: int = 16) -> torch.Tensor:
    """Four binary 12-pixel patterns, repeated: a dataset an RBM with 8 hiddens can model."""
    base = torch.tensor(
        [
            [1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0],
            [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1],
            [1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0],
            [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1],
        ],
        dtype=torch.float32,
    )
    return base.repeat(num_copies, 1)


def flat_buffer(rbm: Rbm) -> torch.Tensor:
    return torch.empty(rbm.num_hidden * rbm.num_visible + rbm.num_visible + rbm.num_hidden + 1)


def layer_sizes(model: DeepBeliefNet) -> list[int]:
    """Visible size of the first RBM, then each RBM's hidden size."""
    return [model.rbms[0].num_visible, *(rbm.num_hidden for rbm in model.rbms)]


# -- the model ------------------------------------------------------------------------------


def test_default_model_has_the_documented_parameter_count():
    model = DeepBeliefNet(784, (500, 500, 2000), 10)
    assert sum(p.numel() for p in model.parameters()) == 1_665_010
    assert layer_sizes(model) == [784, 500, 500, 2000]


def test_unrolled_net_is_the_rbm_stack_not_a_copy():
    torch.manual_seed(0)
    model = DeepBeliefNet(12, (8, 6), 3)
    params = dict(model.named_parameters())
    # The classifier's hidden layers are exactly the RBMs' weights and hidden biases.
    assert set(params) == {
        "rbms.0.weight",
        "rbms.0.hidden_bias",
        "rbms.1.weight",
        "rbms.1.hidden_bias",
        "head.weight",
        "head.bias",
    }
    # Visible biases are buffers: pre-training uses them, fine-tuning (and DDP) does not.
    assert {name for name, _ in model.named_buffers()} == {
        "rbms.0.visible_bias",
        "rbms.1.visible_bias",
    }
    x = torch.rand(5, 12)
    h1 = torch.sigmoid(x @ model.rbms[0].weight.T + model.rbms[0].hidden_bias)
    h2 = torch.sigmoid(h1 @ model.rbms[1].weight.T + model.rbms[1].hidden_bias)
    torch.testing.assert_close(model(x), model.head(h2))
    # Changing an RBM changes the classifier: one set of weights, two uses.
    with torch.no_grad():
        model.rbms[0].weight.add_(1.0)
    assert not torch.allclose(model(x), model.head(h2))


def test_model_flattens_images():
    model = DeepBeliefNet(784, (16,), 10)
    assert model(torch.rand(3, 1, 28, 28)).shape == (3, 10)


# -- CD statistics ----------------------------------------------------------------------------


def test_cd1_mean_field_statistics_by_hand():
    torch.manual_seed(1)
    rbm = Rbm(4, 3, init_std=0.5)
    with torch.no_grad():
        rbm.visible_bias.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
        rbm.hidden_bias.copy_(torch.tensor([0.2, 0.0, -0.1]))
    v0 = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0]])
    out = flat_buffer(rbm)
    settings = CdSettings(epochs=1, lr=0.1, k=1, sample=False)
    cd_statistics(rbm, v0, out, settings, torch.Generator())

    w, b, c = rbm.weight.detach(), rbm.visible_bias, rbm.hidden_bias.detach()
    ph0 = torch.sigmoid(v0 @ w.T + c)
    v1 = torch.sigmoid(ph0 @ w + b)
    ph1 = torch.sigmoid(v1 @ w.T + c)
    torch.testing.assert_close(out[:12].view(3, 4), ph0.T @ v0 - ph1.T @ v1)
    torch.testing.assert_close(out[12:16], (v0 - v1).sum(0))
    torch.testing.assert_close(out[16:19], (ph0 - ph1).sum(0))
    torch.testing.assert_close(out[19], (v0 - v1).square().sum())


def test_k_changes_the_negative_phase_only():
    torch.manual_seed(2)
    rbm = Rbm(6, 4, init_std=0.5)
    v0 = torch.rand(5, 6).round()
    stats = {}
    for k in (1, 3):
        out = flat_buffer(rbm)
        cd_statistics(rbm, v0, out, CdSettings(1, 0.1, k=k, sample=False), torch.Generator())
        stats[k] = out
    w, b, c = rbm.weight.detach(), rbm.visible_bias, rbm.hidden_bias.detach()
    ph0 = torch.sigmoid(v0 @ w.T + c)
    h, v = ph0, None
    for _ in range(3):  # three mean-field Gibbs steps
        v = torch.sigmoid(h @ w + b)
        h = torch.sigmoid(v @ w.T + c)
    torch.testing.assert_close(stats[3][:24].view(4, 6), ph0.T @ v0 - h.T @ v)
    assert not torch.allclose(stats[1][:24], stats[3][:24])
    # The reconstruction error is always that of one up-down pass from the data.
    torch.testing.assert_close(stats[1][-1], stats[3][-1])


def test_sampling_draws_from_the_generator():
    torch.manual_seed(3)
    rbm = Rbm(6, 4, init_std=0.5)
    v0 = torch.rand(8, 6).round()
    settings = CdSettings(1, 0.1, k=2, sample=True)
    outs = []
    for seed in (5, 5, 6):
        out = flat_buffer(rbm)
        cd_statistics(rbm, v0, out, settings, torch.Generator().manual_seed(seed))
        outs.append(out)
    torch.testing.assert_close(outs[0], outs[1])  # same generator state, same samples
    assert not torch.allclose(outs[0], outs[2])


@pytest.mark.parametrize("persistent", [False, True])
def test_cd_training_lowers_reconstruction_error(persistent):
    torch.manual_seed(4)
    rbm = Rbm(12, 8)
    data = patterns()
    settings = CdSettings(epochs=1, lr=0.1, persistent=persistent, seed=0)
    first = train_rbm(rbm, data, serial_strategy(), settings, 8, 0)
    later = train_rbm(rbm, data, serial_strategy(), CdSettings(20, 0.1, seed=1), 8, 0)
    assert later["reconstruction_error"] < 0.5 * first["reconstruction_error"]
    assert first["num_steps"] == 64 // 8


def test_one_cd_step_lowers_reconstruction_error():
    torch.manual_seed(5)
    rbm = Rbm(12, 8, init_std=0.1)
    data = patterns(2)

    def error() -> float:
        with torch.no_grad():
            return float((data - rbm.visible_probs(rbm.hidden_probs(data))).square().mean())

    before = error()
    train_rbm(rbm, data, serial_strategy(), CdSettings(1, 1.0, sample=False), 8, 0)
    assert error() < before


# -- greedy pre-training of a stack ----------------------------------------------------------


def test_pretrain_stack_trains_every_layer_and_reports_figures():
    torch.manual_seed(6)
    model = DeepBeliefNet(12, (8, 6), 3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    settings = CdSettings(epochs=2, lr=0.1, k=2)
    figures = pretrain_stack(model, patterns(), serial_strategy(), settings, 16)
    after = model.state_dict()
    for name in ("rbms.0.weight", "rbms.1.weight", "rbms.1.visible_bias"):
        assert not torch.equal(before[name], after[name]), name
    torch.testing.assert_close(before["head.weight"], after["head.weight"])  # CD leaves it
    assert figures["method"] == "CD-2" and figures["epochs_per_layer"] == 2
    assert [(lay["visible"], lay["hidden"]) for lay in figures["layers"]] == [(12, 8), (8, 6)]
    for layer in figures["layers"]:
        assert layer["time_s"] >= 0 and layer["num_steps"] == 2 * 64 // 16
        assert 0 <= layer["reconstruction_error"] < 1


def test_zero_pretrain_epochs_leave_the_weights_alone():
    model = DeepBeliefNet(12, (8,), 3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    figures = pretrain_stack(model, patterns(), serial_strategy(), CdSettings(0, 0.1), 16)
    assert figures["layers"] == []
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name])


# -- the workload --------------------------------------------------------------------------


def test_options_defaults_and_values():
    assert parse_options({}) == DbnOptions()
    parsed = parse_options(
        {"layers": "64, 32", "cd_k": "3", "persistent": "TRUE", "pretrain_epochs": "0"}
    )
    assert parsed.layers == (64, 32) and parsed.cd_k == 3
    assert parsed.persistent is True and parsed.pretrain_epochs == 0


@pytest.mark.parametrize(
    "key, value",
    [
        ("cd_k", "zero"),
        ("cd_k", "0"),
        ("layers", "500,,2000"),
        ("layers", "0"),
        ("persistent", "maybe"),
        ("pretrain_epochs", "-1"),
        ("pretrain_epochs", "1001"),  # past the data orders a layer owns
        ("pretrain_lr", "0"),
        ("pretrain_lr", "nan"),
        ("pretrain_weight_decay", "-1e-4"),
    ],
)
def test_bad_option_values_fail_with_one_line_naming_the_option(key, value):
    with pytest.raises(ConfigError) as error:
        parse_options({key: value})
    message = str(error.value)
    assert f"-o {key}" in message and "\n" not in message
    with pytest.raises(ConfigError):  # resolution checks them before any worker starts
        tiny_config(workload="mnist-dbn", workload_options={key: value})


def test_images_become_unnormalised_pixel_vectors():
    images = torch.tensor([[[0, 255], [51, 102]]], dtype=torch.uint8).numpy()
    torch.testing.assert_close(images_to_tensor(images), torch.tensor([[0.0, 1.0, 0.2, 0.4]]))


def test_synthetic_data_has_mnist_shapes_and_the_layer_sizes():
    workload = get_workload("mnist-dbn")
    request = DataRequest(options={"layers": "32,16"}, max_train=50, max_test=20)
    data = workload.make_synthetic(request)
    assert data.train_x.shape == (50, 784) and data.test_x.shape == (20, 784)
    assert data.kind == "synthetic" and float(data.train_x.min()) >= 0
    assert float(data.train_x.max()) <= 1
    model = workload.build_model(data.meta)
    assert layer_sizes(model) == [784, 32, 16]


def test_workload_trains_end_to_end_with_both_phases_on_the_clock():
    workload = get_workload("mnist-dbn")
    config = tiny_config(
        workload="mnist-dbn",
        workload_options={"layers": "32,16", "pretrain_epochs": "1", "cd_k": "2"},
        steps=3,
        evaluate=False,
    )
    data = workload.make_synthetic(
        DataRequest(options=config.data.workload_options, max_train=64, max_test=16)
    )
    outcome = train(config, workload, data, make_strategy(config, DistEnv()))
    s = outcome.summary
    assert s["pretrain"]["method"] == "CD-2"
    assert len(s["pretrain"]["layers"]) == 2
    assert s["pretrain_time_s"] > 0 and s["supervised_time_s"] > 0
    assert s["train_time_s"] == pytest.approx(s["pretrain_time_s"] + s["supervised_time_s"])
    # forward + backward of 784-32-16-10 per sample (the first layer's input needs no grad)
    forward = 2 * (784 * 32 + 32 * 16 + 16 * 10)
    assert s["flops_per_sample"] == 3 * forward - 2 * 784 * 32
