"""One data-parallel optimizer step in JAX: the step function the shared loop drives.

The step is one jitted function over the run's mesh, written with `jax.shard_map`: every
replica runs forward and backward on its own rows of the global batch, and `lax.pmean`
averages the gradients (one all-reduce, gloo between processes), then every replica
applies the same optax update to its copy of the parameters. shard_map rather than letting
XLA partition a global-batch jit because it is DDP's algorithm exactly: batch-norm layers
normalise with each replica's own batch statistics (under automatic partitioning they would
become global batch statistics, with an all-reduce per layer and pass), each replica draws
its own dropout masks, and the one collective is the gradients' mean. Running statistics
are averaged over the replicas (as flax's ImageNet example does; DDP takes rank 0's).

Compilation: the step is compiled ahead of time (`jit(...).lower(...).compile()`) for the
first batch's shape before the first step, off the training clock (`compile_s`). A batch of
another shape (texts trimmed to another bucketed width, inputs.py) compiles when it first
comes, ON the step clock: that is time a JAX user's training spends too. The worker's facts
count those compilations and their seconds.

Timing: JAX dispatches asynchronously; the step returns its loss as a torch scalar made
with `float(loss)`, which waits for the step's result, so a step's time holds its compute.
On a GPU the loop's clock is a pair of CUDA events on torch's stream, which JAX does not
use: that stream is idle, so each event is stamped as it is recorded, and the end event is
recorded only after `float(loss)` returned. The pair brackets the step's wall time (its
batch's copy to the GPU, dispatch and compute), as `block_until_ready` would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch
from jax import lax
from jax.sharding import PartitionSpec

from trainscale.frameworks.jax.distribute import AXIS, Distribution
from trainscale.frameworks.jax.inputs import (
    bucket_width,
    host_batch,
    host_labels,
    is_token_set,
    longest_text,
)
from trainscale.parallel.strategy import Strategy
from trainscale.train.faults import FaultInjector
from trainscale.train.loop import StepInput, StepRules

BATCH_STATS = "batch_stats"


@dataclass
class JaxModel:
    """A flax module and its variables: what the evaluator scores and training returns."""

    module: Any
    variables: dict[str, Any]


def cross_entropy(logits: jax.Array, labels: jax.Array, label_smoothing: float) -> jax.Array:
    """Mean cross-entropy in float32, with torch's label smoothing (1 - e on the class,
    e / K spread over all K classes).

    Written as (1 - e) CE(label) + e mean_k(-log p_k), which is that loss exactly, without
    building one-hot targets (a measurable share of a small model's step on the CPU).
    """
    logits = logits.astype(jnp.float32)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    if label_smoothing:
        uniform = -jax.nn.log_softmax(logits).mean(axis=-1)
        loss = (1.0 - label_smoothing) * loss + label_smoothing * uniform
    return loss.mean()


def make_train_step(
    module: Any,
    optimizer: optax.GradientTransformation,
    distribution: Distribution,
    label_smoothing: float,
    seed: int,
    batch_norm: bool,
):
    """The jitted (not yet compiled) step: (state, x, y) -> (state, mean loss).

    One replica (a serial run) jits the replica's step alone: shard_map over a one-device
    mesh, its means being identities, still cost about 5% of mnist-cnn's CPU step.
    """
    base_key = jax.random.PRNGKey(seed)
    parallel = distribution.mesh.size > 1

    def mean(tree: Any) -> Any:
        return lax.pmean(tree, AXIS) if parallel else tree

    def replica_step(state: dict[str, Any], x: jax.Array, y: jax.Array):
        # Each replica its own dropout masks, each step new ones.
        replica = lax.axis_index(AXIS) if parallel else 0
        key = jax.random.fold_in(jax.random.fold_in(base_key, state["step"]), replica)

        def loss_of(params):
            variables = {"params": params}
            if batch_norm:
                variables[BATCH_STATS] = state[BATCH_STATS]
                logits, updates = module.apply(
                    variables, x, train=True, rngs={"dropout": key}, mutable=[BATCH_STATS]
                )
            else:
                logits, updates = module.apply(variables, x, train=True, rngs={"dropout": key}), {}
            return cross_entropy(logits, y, label_smoothing), updates

        (loss, updates), grads = jax.value_and_grad(loss_of, has_aux=True)(state["params"])
        grads = mean(grads)  # the step's one all-reduce
        changes, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        new = {
            "params": optax.apply_updates(state["params"], changes),
            "opt_state": opt_state,
            "step": state["step"] + 1,
        }
        if batch_norm:
            new[BATCH_STATS] = mean(updates[BATCH_STATS])
        return new, mean(loss)

    if not parallel:
        return jax.jit(replica_step, donate_argnums=0)

    split, whole = PartitionSpec(AXIS), PartitionSpec()
    sharded = jax.shard_map(
        replica_step,
        mesh=distribution.mesh,
        in_specs=(whole, split, split),
        out_specs=(whole, whole),
        # The models' recurrent scans start from zero carries that do not vary over the
        # replicas while their outputs do, which the replication check rejects; the
        # outputs are replicated by construction (every one is a pmean or follows from them).
        check_vma=False,
    )
    return jax.jit(sharded, donate_argnums=0)


class JaxStep:
    """One optimizer step of a flax model over the run's replicas (see the module doc)."""

    def __init__(
        self,
        module: Any,
        variables: dict[str, Any],
        optimizer: optax.GradientTransformation,
        distribution: Distribution,
        strategy: Strategy,
        *,
        global_batch: int,
        full_width: int | None,
        label_smoothing: float,
        seed: int,
        facts: dict[str, Any] | None = None,
    ) -> None:
        """`variables` are the initial ones (host arrays); `full_width` is the token sets'
        width (None for other inputs); `global_batch` the samples of one step; `facts`, the
        worker's facts, get the compilations during training when training ends."""
        self.module = module
        self.distribution = distribution
        self.strategy = strategy
        self.full_width = full_width
        self.rules = StepRules(samples_per_step=global_batch)
        batch_norm = BATCH_STATS in variables
        trained = {"params", BATCH_STATS}
        # Collections training does not touch (the DBN's visible biases) stay on the host.
        self.untouched = {k: v for k, v in variables.items() if k not in trained}
        state = {k: v for k, v in variables.items() if k in trained}
        state["opt_state"] = optimizer.init(state["params"])
        state["step"] = np.int32(0)
        self.state = distribution.put_replicated(state)
        self.step_fn = make_train_step(
            module, optimizer, distribution, label_smoothing, seed, batch_norm
        )
        self.compiled: dict[tuple[int, ...], Any] = {}
        self.compiles_in_training = 0
        self.compile_in_training_s = 0.0
        self.facts = facts if facts is not None else {}
        self.faults = FaultInjector(strategy.env.rank)

    # -- compilation -------------------------------------------------------------------------
    def compile_for(self, x: np.ndarray, y: np.ndarray) -> float:
        """Compile the step for batches shaped like this process's `x`, `y`; returns the
        seconds it took (0 when already compiled)."""
        key = x.shape
        if key in self.compiled:
            return 0.0
        t0 = time.perf_counter()
        processes = self.distribution.processes
        split = self.distribution.split()
        shapes = [
            jax.ShapeDtypeStruct((a.shape[0] * processes, *a.shape[1:]), a.dtype, sharding=split)
            for a in (x, y)
        ]
        self.compiled[key] = self.step_fn.lower(self.state, *shapes).compile()
        return time.perf_counter() - t0

    def width_for(self, x: torch.Tensor) -> int | None:
        """The bucketed width of a token batch, agreed by every process (each process's
        rows of the global batch must have one shape); None for other inputs."""
        if self.full_width is None or not is_token_set(x):
            return None
        width = bucket_width(longest_text(x), self.full_width)
        if self.distribution.processes > 1:
            # A scalar max over the bookkeeping channel: ranks' batches come from the same
            # length pool, so they nearly always agree already.
            width = int(self.strategy.max_float(float(width)))
        return width

    # -- the step function protocol ----------------------------------------------------------
    def step(self, given: StepInput) -> torch.Tensor:
        """One optimizer step on the loop's batch; returns the global batch's mean loss."""
        if given.draw is None:
            raise ValueError("a training step takes its batch from the loop")
        x_torch, y_torch = given.draw()
        x = host_batch(x_torch, self.width_for(x_torch))
        y = host_labels(y_torch)
        seconds = self.compile_for(x, y)
        if seconds:  # a new shape: compiled on the step's clock
            self.compiles_in_training += 1
            self.compile_in_training_s += seconds
        put = self.distribution.put_batch
        self.state, loss = self.compiled[x.shape](self.state, put(x), put(y))
        # float() waits for the step: its time includes the compute.
        value = torch.tensor(float(loss.addressable_data(0)))
        self.faults.after_step(given.index + 1)
        return value

    def eval_model(self) -> JaxModel:
        """The current model on this process's first device (read before the next step)."""
        local = {k: v for k, v in self.state.items() if k in ("params", BATCH_STATS)}
        local = jax.tree_util.tree_map(lambda a: a.addressable_data(0), local)
        return JaxModel(self.module, {**local, **self.untouched})

    def finish(self) -> JaxModel:
        """The trained model, its variables as host (numpy) arrays."""
        self.facts.update(
            jax_compiles_in_training=self.compiles_in_training,
            jax_compile_in_training_s=round(self.compile_in_training_s, 3),
        )
        model = self.eval_model()
        model.variables = jax.tree_util.tree_map(np.asarray, model.variables)
        return model
