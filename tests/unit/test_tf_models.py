"""Keras twins of the reference models: parameter counts, exact weight copy, same logits,
padding-independent text models, and CD pre-training in TensorFlow against the torch one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from trainscale.models.dbn_cd import pretrain_epoch  # noqa: E402
from trainscale.models.tensorflow import KerasTwin  # noqa: E402
from trainscale.models.tensorflow import dbn_pretrain as tf_cd  # noqa: E402
from trainscale.parallel.sharding import Sharding  # noqa: E402
from trainscale.workloads import TENSORFLOW, builtin_workload_names, get_workload  # noqa: E402
from trainscale.workloads import dbn_pretrain as torch_cd  # noqa: E402
from trainscale.workloads.dbn_pretrain import CdSettings  # noqa: E402

from tests.helpers.tf_tiny import fix_tensorflow_threads  # noqa: E402

fix_tensorflow_threads()

TEXT_META = {"vocab_size": 50, "num_classes": 2}
DBN_META = {"num_classes": 10, "num_inputs": 784, "layers": [24, 16]}


def torch_twin(workload: str, meta: dict, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return get_workload(workload).build_model(meta).eval()


def keras_twin(workload: str, meta: dict) -> KerasTwin:
    """The workload's Keras twin, as a TensorFlow run gets it (`Workload.models["tensorflow"]`)."""
    return get_workload(workload).build_model(meta, TENSORFLOW)


def build_model(workload: str, meta: dict):
    return keras_twin(workload, meta).model


def count_torch(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def count_keras(model) -> int:
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


def texts(num_classes_seed: int = 0, width: int = 12) -> np.ndarray:
    """Texts of lengths 12, 7, 3, 1 and 0 (all padding), ids 1..49, padded with 0."""
    rng = np.random.default_rng(num_classes_seed)
    lengths = [12, 7, 3, 1, 0]
    ids = np.zeros((len(lengths), width), np.int64)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(1, TEXT_META["vocab_size"], length)
    return ids


def images(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


def randomise_batch_norm(model: torch.nn.Module) -> None:
    """Running statistics and affine terms away from their initial 0/1, so that copying
    them (not just the convolutions) is what makes the logits agree."""
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            size = module.num_features
            module.running_mean.copy_(torch.randn(size, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(size, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(size, generator=generator) + 0.5)
            module.bias.data.copy_(torch.randn(size, generator=generator) * 0.1)


# (workload, meta, torch input, the Keras model's input)
def cases() -> list[tuple[str, dict, np.ndarray, np.ndarray]]:
    mnist = images((3, 1, 28, 28))
    cifar = images((2, 3, 32, 32))
    return [
        ("mnist-cnn", {"num_classes": 10}, mnist, mnist.transpose(0, 2, 3, 1)),
        ("mnist-dbn", DBN_META, images((3, 784)), images((3, 784))),
        ("imdb-bilstm", TEXT_META, texts(), texts()),
        ("imdb-bigru", TEXT_META, texts(), texts()),
        ("cifar10-resnet44", {"num_classes": 10}, cifar, cifar.transpose(0, 2, 3, 1)),
        ("tweets-text", {"vocab_size": 50, "num_classes": 3}, texts(1), texts(1)),
    ]


@pytest.fixture(scope="module")
def copied() -> dict:
    """Each workload's torch model and its Keras twin with the torch weights copied in."""
    pairs = {}
    for workload, meta, torch_x, keras_x in cases():
        torch_model = torch_twin(workload, meta)
        if workload == "cifar10-resnet44":
            with torch.no_grad():
                randomise_batch_norm(torch_model)
        if workload == "mnist-dbn":
            with torch.no_grad():
                for rbm in torch_model.rbms:  # used by pre-training only; copied all the same
                    rbm.visible_bias.normal_()
        twin = keras_twin(workload, meta)
        twin.load_torch_weights(torch_model)
        keras_model = twin.model
        pairs[workload] = (torch_model, keras_model, torch_x, keras_x)
    return pairs


WORKLOADS = [case[0] for case in cases()]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_same_number_of_trainable_parameters(workload, copied):
    torch_model, keras_model, _, _ = copied[workload]
    assert count_keras(keras_model) == count_torch(torch_model)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_copied_weights_give_the_torch_logits(workload, copied):
    torch_model, keras_model, torch_x, keras_x = copied[workload]
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(torch_x)).numpy()
    got = keras_model(keras_x, training=False).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("workload", ["imdb-bilstm", "imdb-bigru", "tweets-text"])
def test_trailing_padding_changes_nothing(workload, copied):
    _, keras_model, _, ids = copied[workload]
    padded = np.pad(ids, ((0, 0), (0, 9)))
    short = keras_model(ids, training=False).numpy()
    np.testing.assert_allclose(keras_model(padded, training=False).numpy(), short, atol=1e-6)
    # Each text alone, cut to its own length (one real token at least), gives its row too.
    for row, text in enumerate(ids):
        alone = text[: max(1, int((text != 0).sum()))][None, :]
        np.testing.assert_allclose(keras_model(alone).numpy()[0], short[row], atol=1e-5)


@pytest.mark.parametrize("workload", ["imdb-bilstm", "tweets-text"])
def test_compiled_graph_cuts_batches_of_any_width(workload, copied):
    """In a tf.function traced once for (None, None) ids, as a trainer runs it, batches of
    other widths (shorter than the widest filter too) give the eager logits."""
    _, keras_model, _, ids = copied[workload]
    spec = tf.TensorSpec((None, None), tf.int64)
    compiled = tf.function(lambda x: keras_model(x, training=False), input_signature=[spec])
    for batch in (ids, np.pad(ids, ((0, 0), (0, 20))), ids[2:, :3]):
        np.testing.assert_allclose(compiled(batch).numpy(), keras_model(batch).numpy(), atol=1e-5)


def test_both_lstm_biases_are_trained_like_torchs(copied):
    """torch's LSTM has an input and a recurrent bias; both get the same gradient there, and
    both are trainable weights here with that same gradient."""
    _, keras_model, _, ids = copied["imdb-bilstm"]
    cell = keras_model.rnn.forward_layer.cell
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(keras_model(ids, training=False) ** 2)
    d_input, d_recurrent = tape.gradient(loss, [cell.input_bias, cell.recurrent_bias])
    assert np.abs(d_input.numpy()).max() > 0
    np.testing.assert_allclose(d_input.numpy(), d_recurrent.numpy())


@pytest.mark.parametrize("workload", ["imdb-bilstm", "imdb-bigru"])
def test_backward_direction_starts_at_each_texts_last_real_token(workload, copied):
    """Per-step outputs of both directions, at the real tokens, do not see the padding."""
    from trainscale.models.tensorflow.text_rnn import embed

    _, keras_model, _, _ = copied[workload]
    text = np.array([[5, 9, 2, 7]])
    padded = np.pad(text, ((0, 0), (0, 6)))
    mask = padded != 0

    def outputs(ids, mask=None):
        return keras_model.rnn(embed(keras_model.embedding, ids), mask=mask).numpy()

    alone = outputs(text)
    with_padding = outputs(padded, mask)
    np.testing.assert_allclose(with_padding[:, :4], alone, atol=1e-6)
    # Without the mask the backward direction would start in the padding: it differs.
    unmasked = outputs(padded)
    hidden = alone.shape[-1] // 2
    assert not np.allclose(unmasked[:, :4, hidden:], alone[:, :, hidden:], atol=1e-4)


@pytest.mark.parametrize("workload", ["imdb-bigru", "tweets-text"])
def test_padding_row_of_the_embedding_is_never_read(workload, copied):
    """torch's padding_idx row stays zero; the Keras twin ignores whatever is in row 0."""
    _, keras_model, _, ids = copied[workload]
    before = keras_model(ids).numpy()
    table = keras_model.embedding.embeddings
    saved = table.numpy()
    try:
        changed = saved.copy()
        changed[0] = 3.0
        table.assign(changed)
        np.testing.assert_allclose(keras_model(ids).numpy(), before, atol=1e-6)
    finally:
        table.assign(saved)


def test_dbn_layers_follow_the_meta_and_copy_every_buffer(copied):
    torch_model, keras_model, _, _ = copied["mnist-dbn"]
    assert [(r.num_visible, r.num_hidden) for r in keras_model.rbms] == [(784, 24), (24, 16)]
    for torch_rbm, rbm in zip(torch_model.rbms, keras_model.rbms, strict=True):
        np.testing.assert_array_equal(rbm.visible_bias.numpy(), torch_rbm.visible_bias.numpy())
        np.testing.assert_array_equal(rbm.kernel.numpy(), torch_rbm.weight.detach().numpy().T)


def test_resnet_copies_batch_norm_running_statistics(copied):
    torch_model, keras_model, _, _ = copied["cifar10-resnet44"]
    last_torch, last_keras = torch_model.blocks[-1].bn2, keras_model.blocks[-1].bn2
    np.testing.assert_array_equal(
        last_keras.moving_variance.numpy(), last_torch.running_var.numpy()
    )
    assert last_keras.momentum == pytest.approx(0.9) and last_keras.epsilon == pytest.approx(1e-5)


def test_every_built_in_workload_has_a_keras_twin():
    assert sorted(builtin_workload_names()) == sorted(WORKLOADS)


def test_mismatched_shapes_are_refused(copied):
    torch_model, _, _, _ = copied["imdb-bigru"]
    other = keras_twin("imdb-bigru", {"vocab_size": 60, "num_classes": 2})
    with pytest.raises(ValueError, match="torch shape"):
        other.load_torch_weights(torch_model)


# -- CD pre-training ------------------------------------------------------------------------


def pixels(rows: int = 64, seed: int = 0) -> np.ndarray:
    """MNIST-shaped rows in [0, 1]: mostly dark with bright strokes, like real digits."""
    rng = np.random.default_rng(seed)
    bright = rng.random((rows, 784)) < 0.15
    return (bright * rng.random((rows, 784))).astype(np.float32)


def serial_order(num_rows: int, epoch: int, seed: int) -> np.ndarray:
    """Every row in a serial PyTorch run's order for `epoch`."""
    return Sharding().shard_indices(num_rows, epoch, seed).numpy()


class SerialStrategy:
    """The part of the torch strategy that `train_rbm` uses, serial."""

    class env:  # noqa: N801 (an attribute namespace, as the real strategy's `env`)
        world_size, rank = 1, 0

    @staticmethod
    def shard_indices(num_samples: int, epoch: int, seed: int) -> torch.Tensor:
        return Sharding().shard_indices(num_samples, epoch, seed)

    @staticmethod
    def sum_tensor(tensor: torch.Tensor) -> torch.Tensor:
        return tensor


@pytest.mark.parametrize("k", [1, 2])
def test_mean_field_cd_updates_equal_the_torch_ones(k):
    data = pixels()
    settings = CdSettings(epochs=2, lr=0.1, k=k, sample=False, seed=3)
    torch_model = torch_twin("mnist-dbn", DBN_META)
    twin = keras_twin("mnist-dbn", DBN_META)
    twin.load_torch_weights(torch_model)
    keras_model = twin.model
    torch_rbm, rbm = torch_model.rbms[0], keras_model.rbms[0]
    torch_cd.init_visible_bias(torch_rbm, torch.from_numpy(data))
    tf_cd.init_visible_bias(rbm, data)
    start = rbm.kernel.numpy()

    expected = torch_cd.train_rbm(
        torch_rbm, torch.from_numpy(data), SerialStrategy, settings, 16, 0
    )
    got = tf_cd.train_rbm(rbm, data, settings, 16, 0, serial_order)

    assert got["num_steps"] == expected["num_steps"] == 8
    assert np.abs(rbm.kernel.numpy() - start).max() > 1e-3  # the updates did move the weights
    assert got["reconstruction_error"] == pytest.approx(expected["reconstruction_error"], rel=1e-4)
    np.testing.assert_allclose(rbm.kernel.numpy(), torch_rbm.weight.detach().numpy().T, atol=1e-5)
    np.testing.assert_allclose(
        rbm.hidden_bias.numpy(), torch_rbm.hidden_bias.detach().numpy(), atol=1e-5
    )
    np.testing.assert_allclose(rbm.visible_bias.numpy(), torch_rbm.visible_bias.numpy(), atol=1e-5)


def test_average_callback_sees_the_summed_statistics():
    """Two 'workers' that each hold half the batch and sum through the callback take the
    same steps as one worker with the whole batch (mean-field)."""
    data = pixels(32, seed=4)
    settings = CdSettings(epochs=1, lr=0.1, sample=False)
    whole = build_model("mnist-dbn", DBN_META).rbms[0]
    halves = build_model("mnist-dbn", DBN_META).rbms[0]
    halves.kernel.assign(whole.kernel.numpy())
    tf_cd.train_rbm(whole, data, settings, 16, 0, serial_order)

    # The other worker's statistics for the same step, computed from its rows (the second
    # half of each global batch) with the same weights: worker 0 adds them in `average`.
    other = tf_cd.make_cd_step(halves, settings, tf.random.Generator.from_seed(0))
    order = serial_order(len(data), pretrain_epoch(0, 0), settings.seed)
    batches = iter(range(len(data) // 16))

    def my_rows(num_rows, epoch, seed):
        return order.reshape(-1, 2, 8)[:, 0].reshape(-1)

    def average(flat):
        step = next(batches)
        rows = tf.constant(data[order[step * 16 + 8 : step * 16 + 16]])
        return (flat + other(rows, rows)[0].numpy()) / 16

    tf_cd.train_rbm(halves, data, settings, 8, 0, my_rows, average=average)
    np.testing.assert_allclose(halves.kernel.numpy(), whole.kernel.numpy(), atol=1e-6)


@pytest.mark.parametrize("persistent", [False, True])
def test_cd_pretraining_lowers_the_reconstruction_error(persistent):
    data = pixels(128, seed=2)
    model = build_model("mnist-dbn", DBN_META)
    settings = CdSettings(epochs=6, lr=0.1, persistent=persistent, seed=1)
    figures = tf_cd.pretrain_stack(model, data, settings, 16, serial_order)
    first = tf_cd.train_rbm(
        build_model("mnist-dbn", DBN_META).rbms[0],
        data,
        CdSettings(1, 0.1, seed=1),
        16,
        0,
        serial_order,
    )
    assert figures["method"] == ("persistent CD-1" if persistent else "CD-1")
    assert figures["global_batch_size"] == 16
    assert [(layer["visible"], layer["hidden"]) for layer in figures["layers"]] == [
        (784, 24),
        (24, 16),
    ]
    assert all(layer["num_steps"] == 6 * 8 for layer in figures["layers"])
    assert figures["layers"][0]["reconstruction_error"] < first["reconstruction_error"]


def test_zero_pretrain_epochs_leave_the_weights_alone():
    model = build_model("mnist-dbn", DBN_META)
    before = model.rbms[0].kernel.numpy()
    figures = tf_cd.pretrain_stack(model, pixels(), CdSettings(0, 0.1), 16, serial_order)
    assert figures["layers"] == []
    np.testing.assert_array_equal(model.rbms[0].kernel.numpy(), before)


def test_replicas_draw_their_own_dropout_masks_and_a_seed_draws_alike():
    # In its own process: TensorFlow's logical devices are fixed once it has started.
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.tf_dropout_replicas"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["replicas_agree"] < 0.75  # independent masks of p = 0.5 agree half the time
    assert seen["calls_agree"] < 0.75  # and each call draws new ones
    assert seen["same_seed_same_masks"] and seen["other_seed_agrees"] < 0.75
    assert 0.35 < seen["kept"] < 0.65
