"""The JAX twins of the reference models: parameter counts, exact weight copies from torch
(the same logits), padding independence of the text models, and the DBN's CD pre-training
against the torch version."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

from trainscale.models.dbn import DeepBeliefNet  # noqa: E402
from trainscale.models.dbn_cd import pretrain_epoch  # noqa: E402
from trainscale.models.jax import FlaxTwin, init_variables  # noqa: E402
from trainscale.models.jax import dbn_pretrain as jax_cd  # noqa: E402
from trainscale.models.jax.recurrent import Direction  # noqa: E402
from trainscale.models.jax.resnet_cifar import ResNetCifar  # noqa: E402
from trainscale.parallel.distenv import DistEnv  # noqa: E402
from trainscale.parallel.sharding import Sharding  # noqa: E402
from trainscale.parallel.strategy import make_strategy  # noqa: E402
from trainscale.workloads import JAX, builtin_workload_names, get_workload  # noqa: E402
from trainscale.workloads import dbn_pretrain as torch_cd  # noqa: E402

from tests.helpers.tiny import tiny_config  # noqa: E402

WORKLOADS = [
    "mnist-cnn",
    "mnist-dbn",
    "imdb-bilstm",
    "imdb-bigru",
    "cifar10-resnet44",
    "tweets-text",
]
TEXT_WORKLOADS = ["imdb-bilstm", "imdb-bigru", "tweets-text"]
VOCAB = 300
TEXT_META = {"vocab_size": VOCAB, "num_classes": 3}
TEXT_LENGTHS = [11, 6, 2, 0]  # an empty text reads one padding token, as in torch


def meta_of(workload: str) -> dict:
    if workload in TEXT_WORKLOADS:
        return TEXT_META
    if workload == "mnist-dbn":
        return {"num_classes": 10, "num_inputs": 784, "layers": [500, 500, 2000]}
    return {"num_classes": 10}


def twin(workload: str, meta: dict | None = None) -> FlaxTwin:
    """The workload's flax twin, as a JAX run gets it (`Workload.models["jax"]`)."""
    return get_workload(workload).build_model(meta or meta_of(workload), JAX)


def build_model(workload: str, meta: dict, dtype=jnp.float32):
    return twin(workload, meta).module(dtype)


def variables_from_torch(workload: str, module, torch_model, sample_x) -> dict:
    return twin(workload).variables_from_torch(module, torch_model, sample_x)


def texts(lengths: list[int], width: int, seed: int = 0) -> np.ndarray:
    """(N, width) token ids in 1..VOCAB-1, each row padded with 0 after its length."""
    rng = np.random.default_rng(seed)
    out = np.zeros((len(lengths), width), np.int64)
    for row, length in enumerate(lengths):
        out[row, :length] = rng.integers(1, VOCAB, length)
    return out


def torch_input(workload: str) -> torch.Tensor:
    """A small batch in the torch model's layout (NCHW images, (N, T) token ids)."""
    generator = torch.Generator().manual_seed(1)
    if workload in TEXT_WORKLOADS:
        return torch.from_numpy(texts(TEXT_LENGTHS, 14))
    shapes = {
        "mnist-cnn": (3, 1, 28, 28),
        "mnist-dbn": (3, 784),
        "cifar10-resnet44": (2, 3, 32, 32),
    }
    return torch.rand(shapes[workload], generator=generator)


def to_jax(x: torch.Tensor) -> jax.Array:
    """The same batch in the JAX model's layout: NHWC images, int32 token ids."""
    if x.ndim == 4:
        return jnp.asarray(x.permute(0, 2, 3, 1).numpy())
    if not x.is_floating_point():
        return jnp.asarray(x.numpy().astype(np.int32))
    return jnp.asarray(x.numpy())


def torch_model(workload: str) -> torch.nn.Module:
    """The seeded torch model, its constant tensors (zero biases, BN's ones and running
    statistics) made random so that a copy that mixed them up could not pass."""
    torch.manual_seed(0)
    model = get_workload(workload).build_model(meta_of(workload))
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if not tensor.is_floating_point() or name.startswith("embedding"):
                continue  # the embedding's padding row stays zero, as torch keeps it
            if torch.all(tensor == tensor.flatten()[0]):
                noise = torch.rand(tensor.shape, generator=generator)
                tensor.copy_(0.5 + noise if name.endswith("running_var") else noise - 0.5)
    return model.eval()


def random_variables(module, *args, seed: int = 0) -> dict:
    """Variables of `module`'s shapes filled with N(0, 0.3^2) draws: quicker on the CPU than
    flax's initialisers, whose every random op is compiled on first use."""
    shapes = jax.eval_shape(lambda: module.init(jax.random.PRNGKey(0), *args))
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(
        lambda leaf: jnp.asarray(0.3 * rng.standard_normal(leaf.shape), leaf.dtype), shapes
    )


def num_params(tree: dict) -> int:
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(tree))


@pytest.mark.parametrize("workload", WORKLOADS)
def test_parameter_count_equals_torch(workload):
    model = torch_model(workload)
    expected = sum(p.numel() for p in model.parameters() if p.requires_grad)
    module = build_model(workload, meta_of(workload))
    shapes = jax.eval_shape(lambda: init_variables(module, to_jax(torch_input(workload)), 0))
    assert num_params(shapes["params"]) == expected


@pytest.mark.parametrize("workload", WORKLOADS)
def test_copied_weights_give_torch_logits(workload):
    model = torch_model(workload)
    x = torch_input(workload)
    with torch.no_grad():
        expected = model(x).numpy()
    module = build_model(workload, meta_of(workload))
    variables = variables_from_torch(workload, module, model, to_jax(x))
    logits = np.asarray(module.apply(variables, to_jax(x), train=False))
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4)


def test_dbn_copy_keeps_visible_biases_apart_from_params():
    model = torch_model("mnist-dbn")
    module = build_model("mnist-dbn", meta_of("mnist-dbn"))
    variables = variables_from_torch("mnist-dbn", module, model, jnp.zeros((1, 784)))
    for index, rbm in enumerate(model.rbms):
        got = variables["rbm"][f"rbm_{index}"]["visible_bias"]
        np.testing.assert_array_equal(np.asarray(got), rbm.visible_bias.numpy())
        assert "visible_bias" not in variables["params"][f"rbm_{index}"]
    # The forward pass needs only the parameters.
    module.apply({"params": variables["params"]}, jnp.zeros((1, 784)))


def test_copied_weights_do_not_share_memory_with_the_torch_model():
    model = torch_model("mnist-dbn")
    module = build_model("mnist-dbn", meta_of("mnist-dbn"))
    variables = variables_from_torch("mnist-dbn", module, model, jnp.zeros((1, 784)))
    before = [np.array(leaf) for leaf in jax.tree_util.tree_leaves(variables)]
    with torch.no_grad():
        for tensor in model.state_dict().values():
            tensor.add_(1.0)  # the torch model trains on, in place
    for leaf, copy in zip(jax.tree_util.tree_leaves(variables), before, strict=True):
        np.testing.assert_array_equal(np.asarray(leaf), copy)


@pytest.mark.parametrize("workload", TEXT_WORKLOADS)
def test_more_padding_leaves_text_outputs_unchanged(workload):
    module = build_model(workload, TEXT_META)
    short = jnp.asarray(texts(TEXT_LENGTHS, 12), jnp.int32)
    long = jnp.pad(short, ((0, 0), (0, 25)))
    variables = random_variables(module, short, seed=3)
    apply = jax.jit(module.apply)
    np.testing.assert_allclose(
        np.asarray(apply(variables, long)),
        np.asarray(apply(variables, short)),
        rtol=1e-5,
        atol=1e-6,
    )


def test_padding_row_of_the_embedding_gets_no_gradient():
    # torch's padding_idx keeps the padding row at zero through training; so must the twin.
    module = build_model("tweets-text", TEXT_META)
    ids = jnp.asarray(texts([2, 1], 6), jnp.int32)  # short texts: windows cover padding
    variables = random_variables(module, ids)

    def loss(params):
        return jnp.sum(module.apply({"params": params}, ids) ** 2)

    grads = jax.jit(jax.grad(loss))(variables["params"])
    table = np.asarray(grads["embedding"]["table"]["embedding"])
    assert np.all(table[0] == 0)
    assert np.any(table[ids[0, 0]] != 0)


def test_text_cnn_matches_torch_on_texts_shorter_than_its_widest_filter():
    model = torch_model("tweets-text")
    x = torch.from_numpy(texts([3, 1], 3))
    module = build_model("tweets-text", TEXT_META)
    variables = variables_from_torch("tweets-text", module, model, to_jax(x))
    with torch.no_grad():
        expected = model(x).numpy()
    logits = np.asarray(module.apply(variables, to_jax(x)))
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_backward_direction_starts_at_each_texts_last_real_token(cell):
    # At a text's last real token the backward direction has read only that token: its
    # output there equals one step of the cell from the zero state on that token alone.
    direction = Direction(cell, 5, reverse=True)
    inputs = jax.random.normal(jax.random.PRNGKey(0), (2, 7, 4))
    lengths = jnp.array([4, 7])
    variables = random_variables(direction, inputs, lengths)
    apply = jax.jit(direction.apply)
    out = apply(variables, inputs, lengths)
    for row, length in enumerate([4, 7]):
        alone = apply(variables, inputs[row : row + 1, length - 1 : length], jnp.array([1]))
        np.testing.assert_allclose(out[row, length - 1], alone[0, 0], rtol=1e-5, atol=1e-6)


def test_training_mode_uses_dropout_and_updates_batch_stats():
    module = ResNetCifar(blocks_per_stage=1)  # ResNet-8 on 8x8 maps: the same blocks, quicker
    x = jax.random.uniform(jax.random.PRNGKey(0), (2, 8, 8, 3))
    variables = random_variables(module, x)
    _, updates = module.apply(variables, x, train=True, mutable=["batch_stats"])
    before = variables["batch_stats"]["bn"]["mean"]
    assert not np.allclose(np.asarray(updates["batch_stats"]["bn"]["mean"]), np.asarray(before))

    text = build_model("imdb-bigru", TEXT_META)
    ids = jnp.asarray(texts(TEXT_LENGTHS, 12), jnp.int32)
    text_vars = random_variables(text, ids)
    text_apply = jax.jit(text.apply, static_argnames="train")
    runs = [
        text_apply(text_vars, ids, train=True, rngs={"dropout": jax.random.PRNGKey(seed)})
        for seed in (0, 1)
    ]
    assert not np.allclose(np.asarray(runs[0]), np.asarray(runs[1]))
    # Evaluation mode is deterministic.
    np.testing.assert_array_equal(
        np.asarray(text_apply(text_vars, ids)), np.asarray(text_apply(text_vars, ids))
    )


def test_bfloat16_computes_in_bfloat16_with_float32_parameters():
    meta = {"num_inputs": 784, "layers": [64, 32], "num_classes": 10}
    module = build_model("mnist-dbn", meta, dtype=jnp.bfloat16)
    x = jax.random.uniform(jax.random.PRNGKey(0), (4, 784))
    variables = init_variables(module, x, seed=0)
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(variables)} == {jnp.dtype("float32")}
    low = module.apply(variables, x)
    full = build_model("mnist-dbn", meta).apply(variables, x)
    assert low.dtype == jnp.bfloat16 and full.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(low, np.float32), np.asarray(full), atol=0.05)


def test_every_built_in_workload_names_its_flax_twin():
    assert sorted(builtin_workload_names()) == sorted(WORKLOADS)
    for workload in WORKLOADS:
        assert isinstance(twin(workload), FlaxTwin)


def test_weights_of_another_architecture_are_refused_by_name():
    module = build_model("imdb-bigru", TEXT_META)
    with pytest.raises(ValueError, match="do not match the JAX TextRNN"):
        twin("mnist-cnn").variables_from_torch(
            module, get_workload("mnist-cnn").build_model({}), jnp.zeros((1, 5), jnp.int32)
        )


# -- DBN pre-training ---------------------------------------------------------------------


def prototypes(num_rows: int, num_visible: int, seed: int = 0) -> np.ndarray:
    """Noisy copies of four random binary patterns: data an RBM can learn to reconstruct."""
    rng = np.random.default_rng(seed)
    base = (rng.random((4, num_visible)) < 0.5).astype(np.float32)
    rows = base[rng.integers(0, 4, num_rows)]
    flips = rng.random(rows.shape) < 0.05
    return np.where(flips, 1 - rows, rows).astype(np.float32)


def serial_torch_strategy():
    return make_strategy(tiny_config(workers=1), DistEnv())


def jax_batches(strategy, num_rows: int, batch: int, settings: torch_cd.CdSettings):
    """The torch version's batch order, as the JAX pre-training takes it."""

    def batches(layer: int, epoch: int) -> np.ndarray:
        order = strategy.shard_indices(num_rows, pretrain_epoch(layer, epoch), settings.seed)
        steps = order.shape[0] // batch
        return order[: steps * batch].numpy().reshape(steps, batch)

    return batches


@pytest.mark.parametrize(("k", "persistent"), [(1, False), (2, True)])
def test_mean_field_cd_updates_equal_the_torch_version(k, persistent):
    torch.manual_seed(0)
    model = DeepBeliefNet(16, (12, 8), 3)
    module = build_model("mnist-dbn", {"num_inputs": 16, "layers": [12, 8], "num_classes": 3})
    data = prototypes(40, 16)
    variables = variables_from_torch("mnist-dbn", module, model, jnp.asarray(data[:1]))
    settings = torch_cd.CdSettings(epochs=2, lr=0.1, k=k, persistent=persistent, sample=False)
    batch = 8
    strategy = serial_torch_strategy()

    expected = torch_cd.pretrain_stack(model, torch.from_numpy(data), strategy, settings, batch)
    trained, figures = jax_cd.pretrain_stack(
        variables,
        data,
        settings,
        jax_batches(strategy, len(data), batch, settings),
        lambda flat: flat / batch,
        global_batch_size=batch,
    )

    for index, rbm in enumerate(model.rbms):
        name = f"rbm_{index}"
        np.testing.assert_allclose(
            np.asarray(trained["params"][name]["kernel"]),
            rbm.weight.detach().numpy().T,
            rtol=1e-4,
            atol=1e-5,
        )
        np.testing.assert_allclose(
            np.asarray(trained["params"][name]["bias"]),
            rbm.hidden_bias.detach().numpy(),
            rtol=1e-4,
            atol=1e-5,
        )
        np.testing.assert_allclose(
            np.asarray(trained["rbm"][name]["visible_bias"]),
            rbm.visible_bias.numpy(),
            rtol=1e-4,
            atol=1e-5,
        )
    assert len(figures["layers"]) == len(expected["layers"]) == 2
    for got, want in zip(figures["layers"], expected["layers"], strict=True):
        assert got["num_steps"] == want["num_steps"] == 2 * (40 // batch)
        assert (got["visible"], got["hidden"]) == (want["visible"], want["hidden"])
        assert got["reconstruction_error"] == pytest.approx(want["reconstruction_error"], rel=1e-4)
    others = {key: value for key, value in figures.items() if key != "layers"}
    assert others == {key: value for key, value in expected.items() if key != "layers"}


def test_two_workers_averaging_their_statistics_equal_one_at_the_same_global_batch():
    # Two workers in threads, their `average` a sum through a barrier: the pre-training only
    # sees its own batches and the callback, and ends where one worker with both ends.
    torch.manual_seed(0)
    module = build_model("mnist-dbn", {"num_inputs": 16, "layers": [12], "num_classes": 3})
    variables = variables_from_torch(
        "mnist-dbn", module, DeepBeliefNet(16, (12,), 3), jnp.zeros((1, 16))
    )
    data = prototypes(48, 16)
    settings = torch_cd.CdSettings(epochs=2, lr=0.1, persistent=True, sample=False)
    global_batch, world = 8, 2

    def run(rank: int, world_size: int, average) -> dict:
        sharding = Sharding(rank, world_size)
        batch = global_batch // world_size

        def batches(layer: int, epoch: int) -> np.ndarray:
            order = sharding.shard_indices(len(data), pretrain_epoch(layer, epoch), settings.seed)
            steps = order.shape[0] // batch
            return order[: steps * batch].numpy().reshape(steps, batch)

        trained, _ = jax_cd.pretrain_stack(
            variables, data, settings, batches, average, global_batch, rank=rank
        )
        return trained

    serial = run(0, 1, lambda flat: flat / global_batch)
    barrier = threading.Barrier(world, timeout=60)  # a failing worker breaks it for both
    posted: dict[int, np.ndarray] = {}
    results: dict[int, dict] = {}

    def worker(rank: int) -> None:
        def average(flat: jax.Array) -> np.ndarray:
            posted[rank] = np.asarray(flat)
            barrier.wait()
            total = sum(posted[other] for other in range(world)) / global_batch
            barrier.wait()  # nobody posts the next step's sums before all have read these
            return total

        results[rank] = run(rank, world, average)

    threads = [threading.Thread(target=worker, args=(rank,), daemon=True) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results) == [0, 1]
    for result in results.values():
        for got, want in zip(
            jax.tree_util.tree_leaves(result), jax.tree_util.tree_leaves(serial), strict=True
        ):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-6)
    start = variables["params"]["rbm_0"]["kernel"]
    assert not np.allclose(np.asarray(serial["params"]["rbm_0"]["kernel"]), np.asarray(start))


def reconstruction_error(rbm: dict, data: jax.Array) -> float:
    hidden = jax.nn.sigmoid(data @ rbm["kernel"] + rbm["bias"])
    visible = jax.nn.sigmoid(hidden @ rbm["kernel"].T + rbm["visible_bias"])
    return float(jnp.mean(jnp.square(data - visible)))


def test_sampled_cd_lowers_the_reconstruction_error():
    module = build_model("mnist-dbn", {"num_inputs": 32, "layers": [16], "num_classes": 2})
    data = jnp.asarray(prototypes(128, 32, seed=1))
    variables = init_variables(module, data[:1], seed=0)
    settings = torch_cd.CdSettings(epochs=4, lr=0.5, seed=5)
    rng = np.random.default_rng(0)

    def batches(layer: int, epoch: int) -> np.ndarray:
        return rng.permutation(128).reshape(8, 16)

    trained, figures = jax_cd.pretrain_stack(
        variables, data, settings, batches, lambda flat: flat / 16, global_batch_size=16
    )

    # The starting RBM gets the same data-based visible biases that pre-training starts from.
    start = {**variables["params"]["rbm_0"], "visible_bias": jax_cd.visible_bias_from_data(data)}
    end = {**trained["params"]["rbm_0"], **trained["rbm"]["rbm_0"]}
    assert reconstruction_error(end, data) < 0.5 * reconstruction_error(start, data)
    assert figures["method"] == "CD-1"
    assert figures["layers"][0]["num_steps"] == 4 * 8
    assert 0 < figures["layers"][0]["reconstruction_error"] < reconstruction_error(start, data)


def test_no_pretraining_epochs_returns_the_variables_unchanged():
    module = build_model("mnist-dbn", {"num_inputs": 8, "layers": [4], "num_classes": 2})
    variables = random_variables(module, jnp.zeros((1, 8)))
    settings = torch_cd.CdSettings(epochs=0, lr=0.1)
    out, figures = jax_cd.pretrain_stack(
        variables, np.zeros((4, 8), np.float32), settings, None, None, global_batch_size=4
    )
    assert out is variables and figures["layers"] == []
