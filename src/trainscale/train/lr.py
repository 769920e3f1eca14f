"""Learning-rate schedules as pure functions of the step, wrapped for torch optimizers."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from trainscale.config.options import RunConfig


def scaled_lr(base_lr: float, global_batch: int, reference_batch: int, rule: str) -> float:
    """The lr for `global_batch` given one tuned at `reference_batch` (Goyal et al. 2017)."""
    ratio = global_batch / reference_batch
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    return base_lr


STEP_MILESTONES = (0.5, 0.75)
"""Where the 'step' schedule divides the lr, as fractions of the total steps."""
STEP_GAMMA = 0.1
"""What the 'step' schedule multiplies the lr by at each milestone."""


def lr_factor(step: int, total_steps: int, schedule: str, warmup_fraction: float) -> float:
    """Multiplier of the peak lr at optimizer step `step` (0-based) of `total_steps`.

    Warm-up is linear from 1/warmup_steps to 1. After it, 'constant' stays at 1, 'cosine'
    follows half a cosine to 0, and 'onecycle' (here only as a plain factor) decays linearly
    to 0. Training uses torch's OneCycleLR for 'onecycle' (see `make_scheduler`). 'step' is
    He et al. 2016's CIFAR schedule: 1, then 0.1 from half of `total_steps`, then 0.01 from
    three quarters (their 32k and 48k of 64k iterations).
    """
    warmup_steps = int(round(warmup_fraction * total_steps))
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    if schedule == "step":
        # Fractions of the whole run, warm-up included: a warm-up does not move the drops.
        passed = sum(step >= int(fraction * total_steps) for fraction in STEP_MILESTONES)
        return STEP_GAMMA**passed
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    if schedule == "onecycle":
        return max(0.0, 1.0 - progress)
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown schedule {schedule!r}")


def make_scheduler(
    optimizer: torch.optim.Optimizer, total_steps: int, schedule: str, warmup_fraction: float
) -> torch.optim.lr_scheduler.LRScheduler:
    """The lr schedule over `total_steps` optimizer steps, peaking at the optimizer's lr.

    'onecycle' is torch's OneCycleLR (Smith & Topin 2019) with its defaults (start at lr/25,
    cosine annealing, momentum cycled opposite to the lr) and `warmup_fraction` as its
    rising share; the default recipes were tuned with exactly this scheduler.
    """
    if schedule == "onecycle" and total_steps >= 10:
        peak = [group["lr"] for group in optimizer.param_groups]
        # OneCycleLR divides by each phase's length: keep both at two steps or more. Runs
        # shorter than 10 steps use the plain linear one-cycle factor below instead.
        pct_start = min(max(warmup_fraction, 3.0 / total_steps), 1.0 - 3.0 / total_steps)
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=peak, total_steps=total_steps, pct_start=pct_start
        )
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, total_steps, schedule, warmup_fraction)
    )


def make_optimizer(
    name: str,
    params,
    lr: float,
    momentum: float,
    weight_decay: float,
    nesterov: bool = True,
    fused: bool = False,
    loss_scaled: bool = False,
) -> torch.optim.Optimizer:
    """The optimizer by name. Weight decay is decoupled for adamw, L2 for sgd and adam.

    `fused` selects the single-kernel implementation (GPU): one launch per step instead of
    one per parameter tensor. `loss_scaled` says a GradScaler drives it (fp16): SGD then
    stays unfused.
    """
    extra: dict[str, Any] = {"fused": True} if fused else {}
    if name == "sgd":
        if loss_scaled:
            # A GradScaler hands overflow handling to a fused optimizer (found_inf), and
            # torch's fused SGD still writes its momentum buffer on the step it must skip:
            # uninitialised memory on the first overflow, then a diverged run (seen on an
            # H200: ResNet-44 fp16, non-finite loss at step 3). Fused Adam/AdamW skip it.
            extra = {}
        return torch.optim.SGD(
            params,
            lr=lr,
            momentum=momentum,
            nesterov=nesterov and momentum > 0,
            weight_decay=weight_decay,
            **extra,
        )
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, **extra)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, **extra)
    raise ValueError(f"unknown optimizer {name!r}")


def make_optimisation(
    model: nn.Module, config: RunConfig, total_steps: int, fused: bool = False
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """The run's optimizer over `model`'s parameters and its lr schedule over `total_steps`
    optimizer steps; `fused` picks the one-kernel optimizer (GPUs)."""
    opt = config.optimisation
    optimizer = make_optimizer(
        opt.optimizer,
        model.parameters(),
        opt.lr,
        opt.momentum,
        opt.weight_decay,
        nesterov=opt.nesterov,
        fused=fused,
        loss_scaled=opt.precision == "fp16",
    )
    scheduler = make_scheduler(optimizer, total_steps, opt.schedule, opt.warmup_fraction)
    return optimizer, scheduler
