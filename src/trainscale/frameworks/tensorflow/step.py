"""One optimizer step in TensorFlow: the step function the shared training loop drives.

The step is one `tf.function` with an input signature whose batch and text-width
dimensions are None, so neither the last partial batch of an evaluation nor a new text
width retraces it. Inside, each replica of the tf.distribute strategy runs its forward and
backward on its samples, with the loss scaled for the global batch
(`tf.nn.compute_average_loss`): the replicas' gradients then sum to the gradient of the
global batch's mean loss. The sum is TensorFlow's own all-reduce
(`batch_reduce_to`, a ring over the worker processes with MultiWorkerMirroredStrategy),
and every replica applies torch's update rule (optim.py) to its copy of the weights.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from trainscale.config.options import RunConfig
from trainscale.frameworks.tensorflow.distribute import TfDistribution
from trainscale.frameworks.tensorflow.inputs import to_model
from trainscale.frameworks.tensorflow.optim import Schedule, TorchOptimizer, hyper_parameters
from trainscale.train.faults import FaultInjector
from trainscale.train.loop import StepInput, StepRules


def per_example_loss(logits: Any, labels: Any, label_smoothing: float) -> Any:
    """Cross-entropy per sample with torch's label smoothing: (1 - e) x the true class's
    negative log-probability + e x the mean over classes (`F.cross_entropy`'s formula)."""
    import tensorflow as tf

    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
    true_class = -tf.gather(log_probs, labels, axis=1, batch_dims=1)
    if not label_smoothing:
        return true_class
    uniform = -tf.reduce_mean(log_probs, axis=1)
    return (1.0 - label_smoothing) * true_class + label_smoothing * uniform


class TfStep:
    """One global optimizer step of a Keras model under a tf.distribute strategy."""

    def __init__(
        self,
        config: RunConfig,
        distribution: TfDistribution,
        model: Any,
        schedule: Schedule,
        sample_shape: tuple[int, ...],
        input_dtype: Any,
        rank: int,
    ) -> None:
        """`sample_shape` and `input_dtype` describe one input sample as the model takes it;
        its text-width dimension (any after the first of a 2-D integer input) is left free."""
        import tensorflow as tf

        opt = config.optimisation
        self.config = config
        self.distribution = distribution
        self.model = model
        self.schedule = schedule
        self.rules = StepRules(samples_per_step=opt.global_batch_size)
        strategy = distribution.strategy
        self.variables = [v.value for v in model.trainable_variables]  # the tf.Variables
        with strategy.scope():
            self.optimizer = TorchOptimizer(opt, self.variables, schedule.nesterov)
        # The replicas' losses are shares of the global mean; their local sum, times this,
        # is the mean over this process's samples (what torch's step returns on its rank).
        self.local_mean_factor = opt.global_batch_size / (
            opt.batch_size * distribution.local_replicas
        )
        texts = len(sample_shape) == 1 and np.issubdtype(input_dtype, np.integer)
        dims = (None,) if texts else sample_shape
        self.signature = [
            tf.TensorSpec((None, *dims), tf.as_dtype(input_dtype)),
            tf.TensorSpec((None,), tf.int64),
            tf.TensorSpec((4,), tf.float32),
        ]
        self._train = tf.function(self._global_step, input_signature=self.signature)
        self.faults = FaultInjector(rank)

    # -- the graph ------------------------------------------------------------------------
    def _global_step(self, x: Any, y: Any, hyper: Any) -> Any:
        strategy = self.distribution.strategy
        losses = strategy.run(self._replica_step, args=(x, y, hyper))
        import tensorflow as tf

        return tf.add_n(list(strategy.experimental_local_results(losses)))

    def _replica_step(self, x: Any, y: Any, hyper: Any) -> Any:
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        local = self.distribution.local_replicas
        if local > 1:
            # One process holds the global batch: each replica takes its slice of it.
            size = tf.shape(x)[0] // local
            replica = context.replica_id_in_sync_group
            x = x[replica * size : (replica + 1) * size]
            y = y[replica * size : (replica + 1) * size]
        opt = self.config.optimisation
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = tf.nn.compute_average_loss(
                per_example_loss(logits, y, opt.label_smoothing),
                global_batch_size=opt.global_batch_size,
            )
        # Dense gradients, as torch's embeddings give (and DDP all-reduces); None where a
        # variable took no part (torch leaves such a parameter untouched: no decay either).
        grads = [
            None if grad is None else tf.convert_to_tensor(grad)
            for grad in tape.gradient(loss, self.variables)
        ]
        context.merge_call(self._apply, args=(grads, hyper))
        return loss

    def _apply(self, strategy: Any, grads: list[Any], hyper: Any) -> None:
        """In cross-replica context: sum the replicas' gradients, then let each replica
        update its copy of every variable."""
        import tensorflow as tf

        used = [
            (grad, variable, slots)
            for grad, variable, slots in zip(
                grads, self.variables, self.optimizer.slots, strict=True
            )
            if grad is not None
        ]
        summed = strategy.extended.batch_reduce_to(
            tf.distribute.ReduceOp.SUM, [(grad, variable) for grad, variable, _ in used]
        )
        for grad, (_, variable, slots) in zip(summed, used, strict=True):
            strategy.extended.update(
                variable, self.optimizer.update, args=(grad, slots, hyper), group=False
            )

    # -- the loop's side ------------------------------------------------------------------
    def compile(self) -> float:
        """Trace the step into its graph before the first step; returns the seconds it took
        (off the training clock, like torch.compile's)."""
        t0 = time.perf_counter()
        self._train.get_concrete_function(*self.signature)
        return time.perf_counter() - t0

    def step(self, given: StepInput) -> torch.Tensor:
        """One optimizer step on the loop's batch; returns this process's mean loss."""
        if given.draw is None:
            raise ValueError("a training step takes its batch from the loop")
        x, y = given.draw()
        hyper = hyper_parameters(self.schedule, self.config.optimisation, given.index)
        loss = self._train(to_model(x), y.numpy(), hyper)
        # Reading the value waits for the step: its time includes its compute.
        value = torch.tensor(float(loss) * self.local_mean_factor)
        self.faults.after_step(given.index + 1)
        return value

    def eval_model(self) -> Any:
        return self.model

    def finish(self) -> Any:
        return self.model
