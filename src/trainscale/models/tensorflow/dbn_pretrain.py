"""Greedy layer-wise contrastive-divergence pre-training of the Keras DBN's RBMs.

A port of `trainscale.workloads.dbn_pretrain` with the same `CdSettings` semantics: CD-k or
persistent CD-k, momentum (its initial value in each RBM's first epoch), L2 weight decay on
the weights, binary hidden samples or mean-field, a step size on batch-mean statistics, and
the same reconstruction-error figures.

Distribution stays outside: each step computes this worker's CD statistics summed over its
batch into one flat vector, and the caller's `average` turns it into the global batch mean
(the sum over all workers divided by the global batch; serially, the batch's own mean).
Every worker then applies the same update, so replicas stay identical. `order` gives this
worker's row order for an epoch: the trainer's shard, so the rows come in the order a
PyTorch run takes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from trainscale.models.dbn_cd import CdSettings, pretrain_epoch, stack_figures

Average = Callable[[np.ndarray], np.ndarray]
Order = Callable[[int, int, int], np.ndarray]

__all__ = ["CdSettings", "make_cd_step", "pretrain_stack", "train_rbm"]


def _sample(probs: tf.Tensor, generator: tf.random.Generator, sample: bool) -> tf.Tensor:
    """Binary states drawn with probabilities `probs` (or `probs` itself, mean-field)."""
    if not sample:
        return probs
    return tf.cast(generator.uniform(tf.shape(probs)) < probs, probs.dtype)


def make_cd_step(rbm: Any, settings: CdSettings, generator: tf.random.Generator) -> Any:
    """A tf.function: (v0, chain) -> (flat statistics summed over the batch, new chain).

    Layout of the flat vector (length V*H + V + H + 1): d kernel (V x H, row-major, the
    Keras kernel's layout), d visible bias, d hidden bias, then the summed squared
    reconstruction error of one up-down pass. As in the torch version, reconstructions are
    visible probabilities, the statistics use the last hidden probabilities, and persistent
    chains keep (sampled) visible states. Without persistence pass `chain=v0`; the
    returned chain is then v0 again and unused.
    """
    persistent = settings.persistent

    def up(visible: tf.Tensor) -> tf.Tensor:
        return tf.sigmoid(tf.matmul(visible, rbm.kernel) + rbm.hidden_bias)

    def down(hidden: tf.Tensor) -> tf.Tensor:
        return tf.sigmoid(tf.matmul(hidden, rbm.kernel, transpose_b=True) + rbm.visible_bias)

    @tf.function(reduce_retracing=True)
    def step(v0: tf.Tensor, chain: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        ph0 = up(v0)
        h0 = _sample(ph0, generator, settings.sample)
        if persistent:
            hidden = _sample(up(chain), generator, settings.sample)
            # The negative chain does not start from the data: the monitored
            # reconstruction needs its own down-pass.
            reconstruction = down(h0)
        else:
            hidden, reconstruction = h0, None
        for k in range(settings.k):
            vk = down(hidden)
            if persistent:
                vk = _sample(vk, generator, settings.sample)
            elif k == 0:
                reconstruction = vk
            phk = up(vk)
            if k < settings.k - 1:
                hidden = _sample(phk, generator, settings.sample)
        d_kernel = tf.matmul(v0, ph0, transpose_a=True) - tf.matmul(vk, phk, transpose_a=True)
        flat = tf.concat(
            [
                tf.reshape(d_kernel, [-1]),
                tf.reduce_sum(v0, axis=0) - tf.reduce_sum(vk, axis=0),
                tf.reduce_sum(ph0, axis=0) - tf.reduce_sum(phk, axis=0),
                tf.reshape(tf.reduce_sum(tf.square(v0 - reconstruction)), [1]),
            ],
            axis=0,
        )
        return flat, (vk if persistent else chain)

    return step


def _make_apply(rbm: Any, settings: CdSettings) -> Any:
    """A tf.function applying one averaged update with momentum and weight decay."""
    num_visible, num_hidden = rbm.num_visible, rbm.num_hidden
    num_weights = num_visible * num_hidden
    velocity = tf.Variable(tf.zeros(num_weights + num_visible + num_hidden), trainable=False)

    @tf.function(reduce_retracing=True)
    def apply(update: tf.Tensor, momentum: tf.Tensor) -> None:
        velocity.assign(momentum * velocity + settings.lr * update[:-1])
        v_kernel = tf.reshape(velocity[:num_weights], (num_visible, num_hidden))
        v_kernel = v_kernel - settings.lr * settings.weight_decay * rbm.kernel
        # Weight decay enters the velocity (it carries over with momentum), as in torch.
        velocity[:num_weights].assign(tf.reshape(v_kernel, [-1]))
        rbm.kernel.assign_add(v_kernel)
        rbm.visible_bias.assign_add(velocity[num_weights : num_weights + num_visible])
        rbm.hidden_bias.assign_add(velocity[num_weights + num_visible :])

    return apply


def init_visible_bias(rbm: Any, inputs: np.ndarray) -> None:
    """Visible biases at log(p / (1 - p)) of each unit's mean activity (the practical guide)."""
    p = np.clip(inputs.mean(axis=0, dtype=np.float64), 0.01, 0.99)
    rbm.visible_bias.assign(np.log(p / (1 - p)).astype(np.float32))


def propagate(rbm: Any, inputs: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """Hidden probabilities of `rbm` for every input row: the next RBM's training data.

    Every worker computes all rows itself: one matrix product per layer, far cheaper than
    the CD epochs that follow, and no collective needed.
    """
    parts = [rbm.hidden_probs(inputs[i : i + chunk]).numpy() for i in range(0, len(inputs), chunk)]
    return np.concatenate(parts, axis=0).astype(np.float32, copy=False)


def train_rbm(
    rbm: Any,
    inputs: np.ndarray,
    settings: CdSettings,
    batch_size: int,
    layer: int,
    order: Order,
    average: Average | None = None,
    worker_seed: int = 0,
    log: Any = None,
) -> dict[str, Any]:
    """Train one RBM on `inputs` (every row, float32, in memory) for `settings.epochs` epochs.

    `batch_size` is this worker's share of the global batch; `order(num_rows, epoch, seed)`
    gives this worker's rows for an epoch (the trainer's shard); `average` maps this worker's
    summed statistics to the global batch mean (default: divide by `batch_size`);
    `worker_seed` differs per worker so that workers draw independent samples. Returns the
    figures of the torch version: the mean squared reconstruction error per unit in the
    last epoch, and the steps taken.
    """
    average = average or (lambda flat: flat / batch_size)
    inputs = np.ascontiguousarray(inputs, dtype=np.float32)
    generator = tf.random.Generator.from_seed(
        (settings.seed + 1) * 1_000_003 + layer * 1_009 + worker_seed
    )
    step_fn = make_cd_step(rbm, settings, generator)
    apply = _make_apply(rbm, settings)
    chain: tf.Tensor | None = None
    error = float("nan")
    steps = 0
    for epoch in range(settings.epochs):
        rows = np.asarray(order(inputs.shape[0], pretrain_epoch(layer, epoch), settings.seed))
        steps_per_epoch = rows.shape[0] // batch_size
        momentum = tf.constant(
            settings.initial_momentum if epoch == 0 else settings.momentum, tf.float32
        )
        error_sum = 0.0
        for step in range(steps_per_epoch):
            v0 = tf.constant(inputs[rows[step * batch_size : (step + 1) * batch_size]])
            if chain is None:
                chain = v0  # persistent chains start from data (Tieleman 2008)
            flat, chain = step_fn(v0, chain if settings.persistent else v0)
            update = np.asarray(average(flat.numpy()), dtype=np.float32)
            error_sum += float(update[-1])
            apply(tf.constant(update), momentum)
            steps += 1
        error = error_sum / max(1, steps_per_epoch) / rbm.num_visible
        if log is not None:
            log(f"epoch {epoch + 1}/{settings.epochs}  reconstruction error {error:.5f}")
    return {"reconstruction_error": error, "num_steps": steps}


def pretrain_stack(
    model: Any,
    train_x: np.ndarray,
    settings: CdSettings,
    batch_size: int,
    order: Order,
    average: Average | None = None,
    global_batch_size: int | None = None,
    worker_seed: int = 0,
    max_float: Callable[[float], float] | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Greedy layer-wise CD pre-training of every RBM of the Keras `model`, bottom to top.

    `train_x` holds every training input (any shape per row, flattened here, in [0, 1]);
    `batch_size` is this worker's share of `global_batch_size` (default: the same, serial);
    `order` and `average` are as `train_rbm` takes them.
    `max_float` takes the slowest worker's layer time (default: this worker's). Returns the
    figures dict of the torch version: CD settings and, per layer, its time and final
    reconstruction error.
    """
    layers: list[dict[str, Any]] = []
    figures = stack_figures(settings, global_batch_size or batch_size, layers)
    if settings.epochs == 0:
        return figures
    max_float = max_float or (lambda value: value)
    inputs = np.asarray(train_x, dtype=np.float32).reshape(len(train_x), -1)
    for index, rbm in enumerate(model.rbms):
        t0 = time.perf_counter()
        if index > 0:
            inputs = propagate(model.rbms[index - 1], inputs)
        init_visible_bias(rbm, inputs)
        name = f"RBM {index + 1}/{len(model.rbms)} ({rbm.num_visible}-{rbm.num_hidden})"

        def log(message: str, name: str = name) -> None:
            if progress is not None:
                progress.log(f"pre-training {name}  {message}")

        result = train_rbm(
            rbm, inputs, settings, batch_size, index, order, average, worker_seed, log
        )
        layers.append(
            {
                "visible": rbm.num_visible,
                "hidden": rbm.num_hidden,
                "time_s": max_float(time.perf_counter() - t0),
                **result,
            }
        )
    return figures
