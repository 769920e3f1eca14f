"""Run as a script (TensorFlow's devices are set once per process): two replicas of a
MirroredStrategy over two logical CPUs call the Keras mnist-cnn twin's dropout; prints, as
JSON, how often their masks agree and whether runs of one seed draw alike."""

from __future__ import annotations

import json

import numpy as np
import tensorflow as tf

from trainscale.models.tensorflow import mnist_cnn
from trainscale.models.tensorflow.dropout import seed_dropouts

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def masks(seed: int) -> list[np.ndarray]:
    """Each replica's mask of the fc dropout, over two calls."""
    with strategy.scope():
        model = mnist_cnn.build()
        layers = seed_dropouts(model, seed)
    assert layers == 2
    ones = tf.ones((8, 128))
    drawn = []
    for _ in range(2):
        out = strategy.run(lambda: model.dropout_fc(ones, training=True))
        drawn += [v.numpy() != 0 for v in strategy.experimental_local_results(out)]
    return drawn


first, again, other = masks(0), masks(0), masks(1)
print(
    json.dumps(
        {
            "replicas_agree": float((first[0] == first[1]).mean()),
            "calls_agree": float((first[0] == first[2]).mean()),
            "same_seed_same_masks": all((a == b).all() for a, b in zip(first, again, strict=True)),
            "other_seed_agrees": float((first[0] == other[0]).mean()),
            "kept": float(first[0].mean()),
        }
    )
)
