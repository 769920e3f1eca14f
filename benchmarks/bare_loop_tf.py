"""A bare TensorFlow/Keras training loop of the MNIST CNN: the yardstick for trainscale's
overhead in TensorFlow.

Same Keras model as trainscale's TensorFlow twin, NHWC in-memory data, Adam, batch, intra-op
threads and core as the trainscale run it is compared with; a tf.function step as the Keras
guide to custom training loops writes it; no launcher, store, progress or bookkeeping.
Prints the median step time of the timed steps as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--core", type=int, default=0)
    args = parser.parse_args()

    os.sched_setaffinity(0, {args.core})
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    from trainscale.workloads import TENSORFLOW, get_workload

    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((60_000, 28, 28, 1), dtype=np.float32)
    y_all = rng.integers(0, 10, 60_000)
    model = get_workload("mnist-cnn").build_model({"num_classes": 10}, TENSORFLOW).model
    optimizer = keras.optimizers.Adam(learning_rate=1e-3, epsilon=1e-8)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    # The recipe's label smoothing, as torch computes it (Keras's sparse loss has none).
    smoothing = get_workload("mnist-cnn").recipe.label_smoothing

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            uniform = -tf.reduce_mean(tf.nn.log_softmax(logits), axis=1)
            loss = (1.0 - smoothing) * loss_fn(y, logits) + smoothing * tf.reduce_mean(uniform)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    order = rng.permutation(60_000)
    times = []
    for index in range(args.steps):
        t0 = time.perf_counter()
        batch = order[index * args.batch_size : (index + 1) * args.batch_size]
        step(tf.constant(x_all[batch]), tf.constant(y_all[batch])).numpy()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"step_time_s_median": statistics.median(times[args.warmup :])}))


if __name__ == "__main__":
    main()
