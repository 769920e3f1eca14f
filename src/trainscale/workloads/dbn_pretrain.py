"""Greedy layer-wise contrastive-divergence pre-training of a stack of RBMs, data parallel.

Each RBM is trained on the hidden probabilities of the (already trained) RBMs below it, with
CD-k (or persistent CD-k) and momentum, as in Hinton, Osindero & Teh (2006) and Hinton's
"practical guide to training RBMs" (2010).

CD is not the gradient of a loss, so DDP cannot average it: each worker computes the CD
statistics of its shard of the global batch, and the workers sum them with one all-reduce of
a single flat buffer per step (weights, both biases and the reconstruction error together),
then divide by the global batch. Every worker then applies the same averaged update to the
same parameters, so the replicas stay identical without a broadcast. With hidden sampling off
(`CdSettings.sample=False`) the result equals a serial run at the same global batch up to
float rounding; with sampling on, each worker draws its own Bernoulli samples (its own
generator), so runs agree in distribution, not bit for bit.
"""

from __future__ import annotations

import time
from typing import Any, cast

import torch

from trainscale.models.dbn import DeepBeliefNet, Rbm
from trainscale.models.dbn_cd import CdSettings, pretrain_epoch, stack_figures


def _sample(probs: torch.Tensor, generator: torch.Generator, sample: bool) -> torch.Tensor:
    """Binary states drawn with probabilities `probs` (or `probs` itself, mean-field)."""
    if not sample:
        return probs
    # A uniform draw and a comparison: about twice as fast as torch.bernoulli on the CPU.
    # Drawn on `probs`' device (`generator` must be there too): no host-to-device copy.
    return torch.rand(probs.shape, generator=generator, device=probs.device, dtype=probs.dtype).lt_(
        probs
    )


@torch.no_grad()
def cd_statistics(
    rbm: Rbm,
    v0: torch.Tensor,
    out: torch.Tensor,
    settings: CdSettings,
    generator: torch.Generator,
    chain: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Write the batch's CD-k statistics as sums over the batch into the flat buffer `out`.

    Layout of `out` (length H*V + V + H + 1): d weight (H x V, row-major), d visible bias,
    d hidden bias, then the summed squared reconstruction error of one up-down pass. The
    statistics are <v h>_data - <v h>_model (the ascent direction of the log-likelihood),
    summed, not averaged, so workers can add theirs before dividing by the global batch.
    Returns the persistent chain's new visible states (None without persistence).

    As the practical guide recommends, reconstructions are visible probabilities (not
    samples) and the statistics use the last hidden probabilities: less sampling noise in
    the update. Persistent chains keep binary visible states, so that they stay a sample of
    the model.
    """
    num_hidden, num_visible = rbm.num_hidden, rbm.num_visible
    d_weight = out[: num_hidden * num_visible].view(num_hidden, num_visible)
    d_visible = out[num_hidden * num_visible : num_hidden * num_visible + num_visible]
    d_hidden = out[num_hidden * num_visible + num_visible : -1]

    ph0 = rbm.hidden_probs(v0)
    h0 = _sample(ph0, generator, settings.sample)
    if chain is None:
        hidden, reconstruction = h0, None
    else:
        hidden = _sample(rbm.hidden_probs(chain), generator, settings.sample)
        # The negative chain does not start from the data, so the monitored reconstruction
        # needs its own down-pass (one extra matrix product per step, persistent CD only).
        reconstruction = rbm.visible_probs(h0)
    for step in range(settings.k):
        vk = rbm.visible_probs(hidden)
        if chain is not None:
            vk = _sample(vk, generator, settings.sample)
        elif step == 0:
            reconstruction = vk
        phk = rbm.hidden_probs(vk)
        if step < settings.k - 1:
            hidden = _sample(phk, generator, settings.sample)

    torch.mm(ph0.t(), v0, out=d_weight)
    d_weight.addmm_(phk.t(), vk, alpha=-1.0)
    torch.sum(v0, dim=0, out=d_visible)
    d_visible.sub_(vk.sum(dim=0))
    torch.sum(ph0, dim=0, out=d_hidden)
    d_hidden.sub_(phk.sum(dim=0))
    assert reconstruction is not None  # the chain's own, or the first step's (k >= 1)
    out[-1] = (v0 - reconstruction).square().sum()
    return vk if chain is not None else None


def init_visible_bias(rbm: Rbm, inputs: torch.Tensor) -> None:
    """Visible biases at log(p / (1 - p)) of each unit's mean activity (the practical guide).

    Without it the first updates spend themselves learning the mean image. The clamp keeps
    always-off border pixels at a finite bias.
    """
    p = inputs.mean(dim=0).clamp(0.01, 0.99)
    with torch.no_grad():
        rbm.visible_bias.copy_(torch.log(p / (1 - p)))


@torch.no_grad()
def propagate(rbm: Rbm, inputs: torch.Tensor, strategy: Any) -> torch.Tensor:
    """Hidden probabilities of `rbm` for every input row: the next RBM's training data.

    Every worker needs the whole transformed set (each epoch reshuffles the shards), so each
    computes its share of the rows and one all-reduce (a sum, with zeros elsewhere) assembles
    it: the work is split rather than repeated on every worker.
    """
    rows = strategy.eval_shard(inputs.shape[0])
    # On the inputs' device: the all-reduce (NCCL on GPUs) and the next RBM need it there.
    out = torch.zeros(inputs.shape[0], rbm.num_hidden, device=inputs.device, dtype=rbm.weight.dtype)
    out[rows] = rbm.hidden_probs(inputs[rows])
    return strategy.sum_tensor(out)


@torch.no_grad()
def train_rbm(
    rbm: Rbm,
    inputs: torch.Tensor,
    strategy: Any,
    settings: CdSettings,
    batch_size: int,
    layer: int,
    log: Any = None,
) -> dict[str, Any]:
    """Train one RBM on `inputs` (every row, in memory) for `settings.epochs` epochs.

    `batch_size` is this worker's share of the global batch. Returns the layer's figures:
    the mean squared reconstruction error per unit in the last epoch, and the steps taken.
    """
    world = strategy.env.world_size
    global_batch = batch_size * world
    num_visible, num_hidden = rbm.num_visible, rbm.num_hidden
    num_weights = num_visible * num_hidden
    # Every buffer, the generator and the batch index live on the RBM's device: the step's
    # products write into `update`, and NCCL all-reduces GPU tensors only.
    device, dtype = rbm.weight.device, rbm.weight.dtype
    update = torch.empty(num_weights + num_visible + num_hidden + 1, device=device, dtype=dtype)
    velocity = torch.zeros(num_weights + num_visible + num_hidden, device=device, dtype=dtype)
    v_weight = velocity[:num_weights].view(num_hidden, num_visible)
    v_visible = velocity[num_weights : num_weights + num_visible]
    v_hidden = velocity[num_weights + num_visible :]
    # Per worker (and per layer): workers draw independent samples for their own shards.
    generator = torch.Generator(device=device).manual_seed(
        (settings.seed + 1) * 1_000_003 + layer * 1_009 + strategy.env.rank
    )
    chain: torch.Tensor | None = None
    error = float("nan")
    steps = 0
    for epoch in range(settings.epochs):
        # Each layer (and the fine-tuning after) gets its own shuffles of the run's seed;
        # every worker draws the same one and takes its shard.
        order = strategy.shard_indices(inputs.shape[0], pretrain_epoch(layer, epoch), settings.seed)
        order = order.to(inputs.device)  # once an epoch, not once a step
        steps_per_epoch = order.shape[0] // batch_size
        momentum = settings.initial_momentum if epoch == 0 else settings.momentum
        # Summed on the device and read once an epoch: reading it each step would wait for
        # the GPU every step. In float64, as the Python float it replaces summed.
        error_sum = torch.zeros((), device=device, dtype=torch.float64)
        for step in range(steps_per_epoch):
            index = order[step * batch_size : (step + 1) * batch_size]
            v0 = inputs.index_select(0, index)
            if settings.persistent and chain is None:
                chain = v0.clone()  # chains start from data, as Tieleman (2008) suggests
            chain = cd_statistics(rbm, v0, update, settings, generator, chain)
            strategy.sum_tensor(update)  # the one collective of the step
            update.div_(global_batch)
            error_sum += update[-1]
            velocity.mul_(momentum).add_(update[:-1], alpha=settings.lr)
            v_weight.add_(rbm.weight, alpha=-settings.lr * settings.weight_decay)
            rbm.weight.add_(v_weight)
            rbm.visible_bias.add_(v_visible)
            rbm.hidden_bias.add_(v_hidden)
            steps += 1
        error = error_sum.item() / max(1, steps_per_epoch) / num_visible
        if log is not None:
            log(f"epoch {epoch + 1}/{settings.epochs}  reconstruction error {error:.5f}")
    return {"reconstruction_error": error, "num_steps": steps}


def pretrain_stack(
    model: DeepBeliefNet,
    train_x: torch.Tensor,
    strategy: Any,
    settings: CdSettings,
    batch_size: int,
    progress: Any = None,
) -> dict[str, Any]:
    """Greedy layer-wise CD pre-training of every RBM of `model`, bottom to top.

    `train_x` holds every training input (flattened, in [0, 1]); `batch_size` is this
    worker's share of the global batch. Returns the figures stored in the run's summary:
    CD settings and, per layer, its time (slowest worker) and final reconstruction error.
    """
    layers: list[dict[str, Any]] = []
    figures = stack_figures(settings, batch_size * strategy.env.world_size, layers)
    if settings.epochs == 0:
        return figures
    inputs = train_x.flatten(1)
    rbms = cast("list[Rbm]", list(model.rbms))
    for index, rbm in enumerate(rbms):
        t0 = time.perf_counter()
        if index > 0:
            inputs = propagate(rbms[index - 1], inputs, strategy)
        init_visible_bias(rbm, inputs)
        name = f"RBM {index + 1}/{len(model.rbms)} ({rbm.num_visible}-{rbm.num_hidden})"

        def log(message: str, name: str = name) -> None:
            if progress is not None:
                progress.log(f"pre-training {name}  {message}")

        result = train_rbm(rbm, inputs, strategy, settings, batch_size, index, log)
        layers.append(
            {
                "visible": rbm.num_visible,
                "hidden": rbm.num_hidden,
                "time_s": strategy.max_float(time.perf_counter() - t0),
                **result,
            }
        )
    return figures
