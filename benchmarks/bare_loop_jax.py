"""A bare JAX (flax + optax) training loop of the MNIST CNN: the yardstick for trainscale's
overhead in JAX.

Same flax model as trainscale's JAX twin, NHWC in-memory data, Adam, batch, XLA CPU threads
and core as the trainscale run it is compared with; one jitted step as the flax examples
write it, the loss read back each step (JAX dispatches asynchronously: a step's time must
hold its compute); no launcher, store, progress or bookkeeping. Prints the median step time
of the timed steps as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--core", type=int, default=0)
    args = parser.parse_args()

    os.sched_setaffinity(0, {args.core})
    # XLA's CPU thread pool is sized from NPROC when the backend starts (as trainscale's JAX
    # worker sizes it: frameworks/jax/distribute.py).
    os.environ["NPROC"] = str(args.threads)
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from trainscale.models.jax import init_variables
    from trainscale.workloads import JAX, get_workload

    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((60_000, 28, 28, 1), dtype=np.float32)
    y_all = rng.integers(0, 10, 60_000)
    module = get_workload("mnist-cnn").build_model({"num_classes": 10}, JAX).module(jnp.float32)
    variables = init_variables(module, x_all[:2], 0)
    params = variables["params"]
    optimizer = optax.adam(1e-3, eps=1e-8)
    opt_state = optimizer.init(params)
    smoothing = get_workload("mnist-cnn").recipe.label_smoothing

    @jax.jit
    def step(params, opt_state, x, y, key):
        def loss_fn(p):
            logits = module.apply({"params": p}, x, train=True, rngs={"dropout": key})
            # The recipe's label smoothing, as torch computes it.
            uniform = -jax.nn.log_softmax(logits).mean(axis=-1)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y)
            return ((1.0 - smoothing) * loss + smoothing * uniform).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    order = rng.permutation(60_000)
    key = jax.random.PRNGKey(0)
    times = []
    for index in range(args.steps):
        t0 = time.perf_counter()
        batch = order[index * args.batch_size : (index + 1) * args.batch_size]
        key, sub = jax.random.split(key)
        params, opt_state, loss = step(
            params, opt_state, jnp.asarray(x_all[batch]), jnp.asarray(y_all[batch]), sub
        )
        float(loss)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"step_time_s_median": statistics.median(times[args.warmup :])}))


if __name__ == "__main__":
    main()
