"""Dropout for the Keras twins: every replica of a tf.distribute strategy draws its own
masks, and a run's masks follow from its seed.

Keras's Dropout draws from a SeedGenerator whose state is a variable, and tf.distribute
makes that one mirrored variable (MirroredStrategy) or copies worker 0's value to every
worker (MultiWorkerMirroredStrategy): every replica drew the same masks, N copies of B / N
masks a step where PyTorch's DDP workers (train/setup.py, `seed_worker_draws`) and JAX's
replicas draw B. Unseeded, the state also came from Python's unseeded `random`, so two runs
of one seed differed. Here each call's seed, which advances alike on every replica, has the
replica's id folded in, and `seed_dropouts` starts every layer's state from the run's seed.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

LAYERS_PER_SEED = 1_000
"""Layer i of a run of seed s starts its state at (s * LAYERS_PER_SEED + i, 0): apart from
the other layers', whose states advance along the second element."""


class ReplicaDropout(keras.layers.Dropout):
    """keras.layers.Dropout whose masks differ between replicas (same rate, same scaling)."""

    def call(self, inputs: Any, training: bool = False) -> Any:
        if not training or self.rate <= 0:
            return inputs
        seed = tf.cast(self.seed_generator.next(), tf.int64)
        context = tf.distribute.get_replica_context()
        # The id within the whole sync group: across the workers of a multi-worker strategy.
        replica = 0 if context is None else context.replica_id_in_sync_group
        seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(replica, tf.int64))
        keep = tf.random.stateless_uniform(tf.shape(inputs), seed=seed) >= self.rate
        scale = tf.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        return tf.where(keep, inputs * scale, tf.zeros_like(inputs))


def seed_dropouts(model: Any, seed: int) -> int:
    """Start every ReplicaDropout layer of `model` from the run's `seed` (in the strategy's
    scope: the states are its variables); returns how many layers there were."""
    # Keras makes no seed state for a rate of 0: such a layer draws nothing.
    layers = [
        layer
        for layer in model._flatten_layers()
        if isinstance(layer, ReplicaDropout) and getattr(layer, "seed_generator", None)
    ]
    for index, layer in enumerate(layers):
        layer.seed_generator.state.assign([seed * LAYERS_PER_SEED + index, 0])
    return len(layers)
