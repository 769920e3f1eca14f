"""Greedy layer-wise CD-k pre-training of the JAX DBN's RBMs: a port of
trainscale.workloads.dbn_pretrain with the same `CdSettings` semantics and figures.

Each RBM is trained on the hidden probabilities of the RBMs below it with CD-k (or
persistent CD-k), momentum (`initial_momentum` in each RBM's first epoch) and L2 weight decay
on the weights, the step size applying to batch-mean statistics. One step is two jitted
functions around the caller's `average`: the CD statistics of this worker's batch as sums in
one flat array (weights, visible bias, hidden bias, squared reconstruction error), then the
update from their average over the global batch. The module knows nothing about
distribution: the trainer hands in each worker's batches (row indices) and an `average`
that sums the flat array over workers and divides by the global batch (for one worker,
`flat / batch_size`). Every worker then applies the same update to the same weights.

With sampling off (`CdSettings.sample=False`) the updates equal the torch version's for the
same start weights and batch order up to float rounding; with sampling on, the Bernoulli
draws come from JAX's generator (per layer and rank), so runs agree in distribution only.

Differences from the torch version, by design: the statistics' weight block is laid out as
flax's kernel (visible x hidden); each worker computes the next layer's inputs for every row
itself (one matrix product per layer) instead of splitting them and summing, which would
need a second kind of collective.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from trainscale.models.dbn_cd import CdSettings, stack_figures
from trainscale.models.jax.dbn import RBM_COLLECTION, rbm_name

Batches = Callable[[int, int], np.ndarray]
"""(layer, epoch) -> this worker's batches as row indices, shape (steps, per-worker batch)."""
Average = Callable[[jax.Array], Any]
"""Flat CD sums of this worker -> their sum over workers divided by the global batch."""


def _sample_key(settings: CdSettings, layer: int, rank: int) -> jax.Array:
    # Per worker and per layer, as in the torch version: each draws its own samples.
    seed = (settings.seed + 1) * 1_000_003 + layer * 1_009 + rank
    return jax.random.PRNGKey(seed % 2**31)


def _hidden_probs(kernel: jax.Array, hidden_bias: jax.Array, visible: jax.Array) -> jax.Array:
    return jax.nn.sigmoid(visible @ kernel + hidden_bias)


def _visible_probs(kernel: jax.Array, visible_bias: jax.Array, hidden: jax.Array) -> jax.Array:
    return jax.nn.sigmoid(hidden @ kernel.T + visible_bias)


@partial(jax.jit, static_argnames=("k", "sample", "persistent"))
def cd_statistics(
    kernel: jax.Array,
    visible_bias: jax.Array,
    hidden_bias: jax.Array,
    v0: jax.Array,
    key: jax.Array,
    chain: jax.Array | None,
    *,
    k: int,
    sample: bool,
    persistent: bool,
) -> tuple[jax.Array, jax.Array | None]:
    """The batch's CD-k statistics as sums over the batch, in one flat array.

    Layout (length V*H + V + H + 1): d kernel (V x H, row-major), d visible bias, d hidden
    bias, then the summed squared reconstruction error of one up-down pass. The statistics
    are <v h>_data - <v h>_model. As in the torch version, reconstructions are visible
    probabilities, the statistics use the last hidden probabilities, and persistent chains
    keep (sampled) visible states. Returns (flat, the chain's new visible states or None).
    """
    keys = iter(jax.random.split(key, 2 * k + 2))

    def draw(probs: jax.Array) -> jax.Array:
        if not sample:
            return probs
        return (jax.random.uniform(next(keys), probs.shape) < probs).astype(probs.dtype)

    up = partial(_hidden_probs, kernel, hidden_bias)
    down = partial(_visible_probs, kernel, visible_bias)
    ph0 = up(v0)
    h0 = draw(ph0)
    if persistent:
        assert chain is not None  # persistent CD carries its chain from step to step
        hidden = draw(up(chain))
        # The chain does not start from the data: the monitored reconstruction needs its
        # own down-pass.
        reconstruction = down(h0)
    else:
        hidden, reconstruction = h0, None
    for step in range(k):
        vk = down(hidden)
        if persistent:
            vk = draw(vk)
        elif step == 0:
            reconstruction = vk
        phk = up(vk)
        if step < k - 1:
            hidden = draw(phk)
    assert reconstruction is not None  # the chain's own, or the first step's (k >= 1)
    flat = jnp.concatenate(
        [
            (v0.T @ ph0 - vk.T @ phk).reshape(-1),
            v0.sum(axis=0) - vk.sum(axis=0),
            ph0.sum(axis=0) - phk.sum(axis=0),
            jnp.square(v0 - reconstruction).sum()[None],
        ]
    )
    return flat, (vk if persistent else None)


@jax.jit
def apply_update(
    rbm: dict[str, jax.Array],
    velocity: dict[str, jax.Array],
    average: jax.Array,
    momentum: jax.Array,
    lr: jax.Array,
    weight_decay: jax.Array,
) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
    """One momentum step from the averaged flat statistics (the torch version's arithmetic).

    velocity = momentum * velocity + lr * statistics; the weights' velocity also takes
    -lr * weight_decay * weight (so momentum carries the decay too); parameters += velocity.
    """
    num_visible, num_hidden = rbm["kernel"].shape
    num_weights = num_visible * num_hidden
    statistics = {
        "kernel": average[:num_weights].reshape(num_visible, num_hidden),
        "visible_bias": average[num_weights : num_weights + num_visible],
        "hidden_bias": average[num_weights + num_visible : -1],
    }
    velocity = {name: momentum * velocity[name] + lr * statistics[name] for name in velocity}
    velocity["kernel"] = velocity["kernel"] - lr * weight_decay * rbm["kernel"]
    rbm = {name: rbm[name] + velocity[name] for name in rbm}
    return rbm, velocity


@jax.jit
def _propagate(kernel: jax.Array, hidden_bias: jax.Array, inputs: jax.Array) -> jax.Array:
    return _hidden_probs(kernel, hidden_bias, inputs)


def visible_bias_from_data(inputs: jax.Array) -> jax.Array:
    """log(p / (1 - p)) of each visible unit's mean activity (clamped to [0.01, 0.99])."""
    p = jnp.clip(jnp.mean(inputs, axis=0), 0.01, 0.99)
    return jnp.log(p / (1 - p))


def train_rbm(
    rbm: dict[str, jax.Array],
    inputs: jax.Array,
    settings: CdSettings,
    batches: Callable[[int], np.ndarray],
    average: Average,
    key: jax.Array,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[str, jax.Array], dict[str, Any]]:
    """Train one RBM ({"kernel" (V x H), "visible_bias", "hidden_bias"}) on `inputs`.

    `batches(epoch)` gives this worker's batches as row indices (steps, batch). Returns the
    new RBM and its figures: the mean squared reconstruction error per unit in the last
    epoch and the steps taken.
    """
    num_visible = int(rbm["kernel"].shape[0])
    velocity = {name: jnp.zeros_like(value) for name, value in rbm.items()}
    lr = jnp.float32(settings.lr)
    weight_decay = jnp.float32(settings.weight_decay)
    chain: jax.Array | None = None
    error = float("nan")
    steps = 0
    for epoch in range(settings.epochs):
        order = np.asarray(batches(epoch))
        momentum = jnp.float32(settings.initial_momentum if epoch == 0 else settings.momentum)
        error_sum = jnp.float32(0.0)  # summed on the device: no host sync per step
        for index in order:
            v0 = inputs[jnp.asarray(index)]
            if settings.persistent and chain is None:
                chain = v0  # chains start from data (Tieleman 2008)
            key, step_key = jax.random.split(key)
            flat, chain = cd_statistics(
                rbm["kernel"],
                rbm["visible_bias"],
                rbm["hidden_bias"],
                v0,
                step_key,
                chain,
                k=settings.k,
                sample=settings.sample,
                persistent=settings.persistent,
            )
            averaged = jnp.asarray(average(flat), jnp.float32)  # the one collective of the step
            error_sum = error_sum + averaged[-1]
            rbm, velocity = apply_update(rbm, velocity, averaged, momentum, lr, weight_decay)
            steps += 1
        error = float(error_sum) / max(1, len(order)) / num_visible
        if log is not None:
            log(f"epoch {epoch + 1}/{settings.epochs}  reconstruction error {error:.5f}")
    return rbm, {"reconstruction_error": error, "num_steps": steps}


def pretrain_stack(
    variables: dict[str, Any],
    train_x: Any,
    settings: CdSettings,
    batches: Batches,
    average: Average,
    global_batch_size: int,
    rank: int = 0,
    slowest: Callable[[float], float] = float,
    progress: Any = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Greedy layer-wise CD pre-training of every RBM of a JAX DBN's `variables`, bottom up.

    `train_x` holds every training input (N, ...) in [0, 1]; `batches(layer, epoch)` gives
    this worker's batches of rows (for the torch version's order: the trainer's sharding
    at epoch `dbn_cd.pretrain_epoch(layer, epoch)` with the run's seed); `average` is
    described in the module docstring;
    `slowest` turns this worker's seconds into the slowest worker's (identity when serial);
    `progress.log(line)` hears each epoch. Returns (the variables with the trained RBMs,
    the figures): CD settings and, per layer, its time and final reconstruction error, as
    the torch version's `pretrain_stack` returns them.
    """
    params = dict(variables["params"])
    visible = dict(variables.get(RBM_COLLECTION, {}))
    num_rbms = sum(1 for name in params if name.startswith("rbm_"))
    layers: list[dict[str, Any]] = []
    figures = stack_figures(settings, global_batch_size, layers)
    if settings.epochs == 0:
        return variables, figures
    inputs = jnp.asarray(train_x, jnp.float32).reshape(np.shape(train_x)[0], -1)
    for index in range(num_rbms):
        t0 = time.perf_counter()
        name = rbm_name(index)
        if index > 0:
            below = params[rbm_name(index - 1)]
            inputs = _propagate(below["kernel"], below["bias"], inputs)
        rbm = {
            "kernel": params[name]["kernel"],
            "visible_bias": visible_bias_from_data(inputs),
            "hidden_bias": params[name]["bias"],
        }
        num_visible, num_hidden = (int(size) for size in rbm["kernel"].shape)
        label = f"RBM {index + 1}/{num_rbms} ({num_visible}-{num_hidden})"

        def log(message: str, label: str = label) -> None:
            if progress is not None:
                progress.log(f"pre-training {label}  {message}")

        rbm, result = train_rbm(
            rbm,
            inputs,
            settings,
            partial(batches, index),
            average,
            _sample_key(settings, index, rank),
            log,
        )
        jax.block_until_ready(rbm)
        params[name] = {"kernel": rbm["kernel"], "bias": rbm["hidden_bias"]}
        visible[name] = {"visible_bias": rbm["visible_bias"]}
        layers.append(
            {
                "visible": num_visible,
                "hidden": num_hidden,
                "time_s": slowest(time.perf_counter() - t0),
                **result,
            }
        )
    return {**variables, "params": params, RBM_COLLECTION: visible}, figures
