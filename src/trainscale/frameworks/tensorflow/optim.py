"""The run's optimizer in TensorFlow, with torch's exact update rules and lr schedule.

Keras's own optimizers differ from torch's in ways that change training: Keras SGD keeps a
velocity that already holds the lr (torch's momentum buffer does not, which matters once the
lr changes every step), its weight decay is decoupled for every optimizer (torch: L2 added
to the gradient for sgd and adam, decoupled only for adamw), and Keras Adam adds epsilon to
the bias-uncorrected second moment (torch adds it after correcting it). So the update is
written out here, line for line as torch's single-tensor SGD/Adam/AdamW do it
(torch/optim/sgd.py, adam.py), and every per-step hyper-parameter (lr; momentum or beta1,
which torch's OneCycleLR cycles) comes from torch's own scheduler, run once on a dummy
parameter: the schedule is torch's by construction, not a re-implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trainscale.config.options import OptimisationConfig
from trainscale.train.lr import make_optimizer, make_scheduler

ADAM_BETA2 = 0.999
"""torch's default, which make_optimizer keeps."""
ADAM_EPS = 1e-8
"""torch's default, which make_optimizer keeps."""


@dataclass(frozen=True)
class Schedule:
    """torch's per-step hyper-parameters over a run's optimizer steps."""

    lr: list[float]
    momentum: list[float]
    """SGD's momentum, or Adam's beta1, at each step (OneCycleLR cycles it)."""
    nesterov: bool


def torch_schedule(opt: OptimisationConfig, total_steps: int) -> Schedule:
    """The lr and momentum (beta1) torch's optimizer uses at every step of the run, read
    from `make_optimizer` and `make_scheduler` stepping a dummy parameter."""
    dummy = torch.zeros(1, requires_grad=True)
    optimizer = make_optimizer(
        opt.optimizer, [dummy], opt.lr, opt.momentum, opt.weight_decay, nesterov=opt.nesterov
    )
    scheduler = make_scheduler(optimizer, total_steps, opt.schedule, opt.warmup_fraction)
    group = optimizer.param_groups[0]
    lrs: list[float] = []
    momenta: list[float] = []
    for _ in range(total_steps):
        lrs.append(float(group["lr"]))
        momenta.append(float(group["betas"][0] if "betas" in group else group["momentum"]))
        # No gradient: the step changes nothing but counts, as the scheduler expects.
        optimizer.step()
        scheduler.step()
    return Schedule(lrs, momenta, bool(group.get("nesterov", False)))


def hyper_parameters(schedule: Schedule, opt: OptimisationConfig, step: int) -> np.ndarray:
    """The step's scalars for `TorchOptimizer.update`, computed in float64 as torch does:
    [lr, momentum or beta1, Adam's step size lr / (1 - beta1^t), sqrt(1 - beta2^t)]."""
    lr, momentum = schedule.lr[step], schedule.momentum[step]
    t = step + 1
    step_size, correction2 = lr, 1.0
    if opt.optimizer in ("adam", "adamw"):
        step_size = lr / (1 - momentum**t)
        correction2 = (1 - ADAM_BETA2**t) ** 0.5
    return np.array([lr, momentum, step_size, correction2], dtype=np.float32)


class TorchOptimizer:
    """torch's SGD (momentum, Nesterov, L2), Adam (L2) or AdamW (decoupled decay) over
    TensorFlow variables; its state lives in variables made under the tf.distribute
    strategy's scope, so each replica holds its copy."""

    def __init__(self, opt: OptimisationConfig, variables: list[Any], nesterov: bool) -> None:
        import tensorflow as tf

        self.name = opt.optimizer
        self.weight_decay = opt.weight_decay
        self.nesterov = nesterov
        slots = 1 if self.name == "sgd" else 2

        def zeros(variable: Any, index: int) -> Any:
            return tf.Variable(
                tf.zeros(variable.shape, variable.dtype), trainable=False, name=f"slot{index}"
            )

        # Momentum buffer (SGD); first and second moments (Adam). Zeros: torch's first SGD
        # step sets the buffer to the gradient, which momentum * 0 + gradient also gives.
        self.slots = [[zeros(v, i) for i in range(slots)] for v in variables]

    def update(self, variable: Any, grad: Any, slots: list[Any], hyper: Any) -> None:
        """Update one variable (one replica's copy) with its summed gradient, as torch."""
        lr, momentum, step_size, correction2 = (hyper[i] for i in range(4))
        decay = self.weight_decay
        if self.name == "sgd":
            if decay:
                grad = grad + decay * variable
            (buffer,) = slots
            buffer.assign(momentum * buffer + grad)
            direction = grad + momentum * buffer if self.nesterov else buffer
            variable.assign_sub(lr * direction)
            return
        if decay and self.name == "adamw":
            variable.assign(variable * (1 - lr * decay))
        elif decay:
            grad = grad + decay * variable
        first, second = slots
        first.assign(first + (grad - first) * (1 - momentum))  # torch's lerp
        second.assign(second * ADAM_BETA2 + grad * grad * (1 - ADAM_BETA2))
        import tensorflow as tf

        denominator = tf.sqrt(second) / correction2 + ADAM_EPS
        variable.assign_sub(step_size * first / denominator)
