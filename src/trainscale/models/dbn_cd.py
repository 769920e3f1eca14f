"""Greedy contrastive-divergence pre-training of a DBN's RBMs, as every framework runs it:
its settings (`CdSettings`) and the figures it reports (`stack_figures`). The PyTorch
implementation (trainscale.workloads.dbn_pretrain) and its TensorFlow and JAX ports
(trainscale.models.tensorflow.dbn_pretrain, trainscale.models.jax.dbn_pretrain) share them,
so a run's pre-training is configured and stored the same way whatever trains it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CdSettings:
    """How each RBM of the stack is trained."""

    epochs: int
    """Passes over the training set per RBM (0 = no pre-training)."""
    lr: float
    """Step size on the batch-mean CD statistics (independent of the number of workers)."""
    k: int = 1
    """Gibbs steps in the negative phase (CD-k)."""
    persistent: bool = False
    """Persistent CD (Tieleman 2008): the negative chains carry over between updates."""
    weight_decay: float = 2e-4
    """L2 penalty on the weights (not the biases), as Hinton et al. 2006 used."""
    momentum: float = 0.9
    initial_momentum: float = 0.5
    """Momentum during each RBM's first epoch: the early statistics change quickly."""
    sample: bool = True
    """Draw binary hidden states in the negative phase; False = mean-field (deterministic)."""
    seed: int = 0


PRETRAIN_EPOCHS_PER_LAYER = 1_000
"""Layer l's pre-training epochs shuffle as epochs 1000 (l + 1), 1000 (l + 1) + 1, ... of
the run's seed (`pretrain_epoch`): apart from the other layers', however many epochs each
trains (up to 1000), and from fine-tuning's first 1000 epochs (a DBN fine-tuned longer
shares an order with pre-training: its epoch 1000 takes layer 0's first)."""


def pretrain_epoch(layer: int, epoch: int) -> int:
    """The epoch number whose data order `layer`'s pre-training epoch `epoch` takes (pass it
    with the run's seed to the trainer's sharding: every framework then shuffles alike)."""
    return PRETRAIN_EPOCHS_PER_LAYER * (layer + 1) + epoch


def stack_figures(
    settings: CdSettings, global_batch_size: int, layers: list[dict[str, Any]]
) -> dict[str, Any]:
    """The figures a CD pre-training stores in its run's summary, the same in every
    framework: its settings, the global batch, and `layers` (each layer's time and final
    reconstruction error, filled in as they train)."""
    return {
        "method": f"{'persistent ' if settings.persistent else ''}CD-{settings.k}",
        "cd_k": settings.k,
        "persistent": settings.persistent,
        "epochs_per_layer": settings.epochs,
        "lr": settings.lr,
        "weight_decay": settings.weight_decay,
        "global_batch_size": global_batch_size,
        "layers": layers,
    }
