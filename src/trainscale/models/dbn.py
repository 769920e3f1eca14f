"""A deep belief network (Hinton, Osindero & Teh 2006): architecture only.

A stack of Bernoulli-Bernoulli RBMs, and the same stack unrolled into a feed-forward
classifier: each sigmoid hidden layer of the classifier *is* an RBM (its weight and hidden
bias are the RBM's parameters, not copies), topped by a linear softmax head. Greedy
contrastive-divergence pre-training (trainscale.workloads.dbn_pretrain) fits the RBMs; supervised
fine-tuning then trains the whole classifier with backprop.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F


class Rbm(nn.Module):
    """A restricted Boltzmann machine with binary (Bernoulli) visible and hidden units.

    Energy E(v, h) = -v.b - h.c - h.W.v, so p(h=1|v) = sigmoid(W v + c) and
    p(v=1|h) = sigmoid(W^T h + b). `weight` (hidden x visible) and `hidden_bias` are
    parameters because the unrolled classifier trains them; `visible_bias` is a buffer
    because only pre-training uses it: a parameter without a gradient would make DDP stop
    with an "unused parameters" error, and an optimizer would carry state for it.
    """

    visible_bias: torch.Tensor

    def __init__(self, num_visible: int, num_hidden: int, init_std: float = 0.01):
        super().__init__()
        # Small random weights and zero biases, as in Hinton's "practical guide" (2010).
        # In place: the same values, and nothing to compute when built for its shapes only.
        self.weight = nn.Parameter(torch.randn(num_hidden, num_visible).mul_(init_std))
        self.hidden_bias = nn.Parameter(torch.zeros(num_hidden))
        self.register_buffer("visible_bias", torch.zeros(num_visible))

    @property
    def num_visible(self) -> int:
        return int(self.weight.shape[1])

    @property
    def num_hidden(self) -> int:
        return int(self.weight.shape[0])

    def hidden_probs(self, visible: torch.Tensor) -> torch.Tensor:
        """p(h=1 | v) for a batch of visible vectors (batch x visible)."""
        return torch.sigmoid(F.linear(visible, self.weight, self.hidden_bias))

    def visible_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """p(v=1 | h) for a batch of hidden vectors (batch x hidden)."""
        return torch.sigmoid(F.linear(hidden, self.weight.t(), self.visible_bias))

    def forward(self, visible: torch.Tensor) -> torch.Tensor:
        """The deterministic up-pass used by the classifier: hidden probabilities."""
        return self.hidden_probs(visible)

    def extra_repr(self) -> str:
        return f"visible={self.num_visible}, hidden={self.num_hidden}"


class DeepBeliefNet(nn.Module):
    """RBMs stacked input-to-top, unrolled into sigmoid layers, plus a linear softmax head.

    With the default sizes 784-500-500-2000-10 it has 1,665,010 trainable parameters. The
    forward pass returns logits; the softmax is in the cross-entropy loss.
    """

    def __init__(self, num_inputs: int, hidden_sizes: Sequence[int], num_classes: int):
        super().__init__()
        if not hidden_sizes:
            raise ValueError("a deep belief network needs at least one hidden layer")
        sizes = [num_inputs, *hidden_sizes]
        self.rbms = nn.ModuleList(Rbm(sizes[i], sizes[i + 1]) for i in range(len(hidden_sizes)))
        self.head = nn.Linear(sizes[-1], num_classes)

    def features(self, x: torch.Tensor, depth: int | None = None) -> torch.Tensor:
        """Hidden probabilities after the first `depth` RBMs (all of them by default)."""
        x = x.flatten(1)
        for rbm in self.rbms[:depth]:
            x = rbm(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
