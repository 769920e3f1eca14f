"""The run's optimizer in optax, with exactly PyTorch's update rules and per-step schedule.

The schedule is not re-derived: the per-step values are read off torch's own scheduler
(trainscale.train.lr.make_scheduler) stepping a dummy optimizer of the run's kind, so the
lr of every step, and the momentum (SGD) or beta1 (Adam) that OneCycleLR cycles opposite to
it, are PyTorch's to the last bit of float64 arithmetic. optax reads them from those tables
by its step count (inject_hyperparams).

Update rules, as torch computes them:
- sgd: L2 weight decay added to the gradient, then the momentum buffer b = m b + g (no
  dampening) and, with Nesterov, the step g + m b (optax.trace computes the same);
- adam: L2 weight decay added to the gradient, then Adam with eps 1e-8 outside the square
  root and bias corrections with the current beta1 (optax.scale_by_adam);
- adamw: Adam, with decoupled weight decay lr * wd * p (optax's adamw order gives torch's
  p - lr wd p - lr adam).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
import optax
import torch

from trainscale.config.options import OptimisationConfig
from trainscale.train.lr import make_optimizer, make_scheduler

ADAM_EPS = 1e-8  # torch.optim.Adam's default
ADAM_BETA2 = 0.999


@dataclass(frozen=True)
class Schedule:
    """The per-step hyper-parameters torch's scheduler sets, one value per optimizer step."""

    lr: np.ndarray
    momentum: np.ndarray
    """SGD's momentum, or Adam's beta1, at each step."""


def torch_schedule(opt: OptimisationConfig, total_steps: int) -> Schedule:
    """Step torch's scheduler `total_steps` times over a dummy optimizer of the run's kind
    and record the lr and momentum (beta1) each step uses."""
    dummy = torch.nn.Parameter(torch.zeros(1))
    optimizer = make_optimizer(
        opt.optimizer, [dummy], opt.lr, opt.momentum, opt.weight_decay, nesterov=opt.nesterov
    )
    scheduler = make_scheduler(optimizer, total_steps, opt.schedule, opt.warmup_fraction)
    group = optimizer.param_groups[0]
    lrs, momenta = [], []
    for _ in range(total_steps):
        lrs.append(group["lr"])
        momenta.append(group["betas"][0] if "betas" in group else group["momentum"])
        optimizer.step()  # no gradient: changes nothing, keeps the scheduler's order check
        scheduler.step()
    return Schedule(np.asarray(lrs, np.float64), np.asarray(momenta, np.float64))


def _table(values: np.ndarray):
    """An optax schedule reading `values` at the optimizer's step count (the last value
    past the end)."""
    table = jnp.asarray(values, jnp.float32)
    last = len(values) - 1
    return lambda count: table[jnp.minimum(count, last)]


def _sgd(learning_rate, momentum, weight_decay, nesterov):
    return optax.chain(
        optax.add_decayed_weights(weight_decay),
        optax.trace(decay=momentum, nesterov=nesterov),
        optax.scale_by_learning_rate(learning_rate),
    )


def _adam(learning_rate, b1, weight_decay):
    return optax.chain(
        optax.add_decayed_weights(weight_decay),  # L2: part of the gradient Adam scales
        optax.scale_by_adam(b1=b1, b2=ADAM_BETA2, eps=ADAM_EPS),
        optax.scale_by_learning_rate(learning_rate),
    )


def _adamw(learning_rate, b1, weight_decay):
    return optax.chain(
        optax.scale_by_adam(b1=b1, b2=ADAM_BETA2, eps=ADAM_EPS),
        optax.add_decayed_weights(weight_decay),  # decoupled: added after Adam's scaling
        optax.scale_by_learning_rate(learning_rate),
    )


def make_optax(opt: OptimisationConfig, schedule: Schedule) -> optax.GradientTransformation:
    """The run's optimizer, its lr and momentum (beta1) following `schedule` step by step."""
    lr, momentum = _table(schedule.lr), _table(schedule.momentum)
    if opt.optimizer == "sgd":
        nesterov = opt.nesterov and opt.momentum > 0  # as make_optimizer asks torch
        return optax.inject_hyperparams(_sgd, static_args=("nesterov",))(
            learning_rate=lr, momentum=momentum, weight_decay=opt.weight_decay, nesterov=nesterov
        )
    if opt.optimizer in ("adam", "adamw"):
        factory = _adam if opt.optimizer == "adam" else _adamw
        return optax.inject_hyperparams(factory)(
            learning_rate=lr, b1=momentum, weight_decay=opt.weight_decay
        )
    raise ValueError(f"unknown optimizer {opt.optimizer!r}")
