"""A small CNN over word embeddings for short posts (Kim 2014): architecture only.

embedding -> parallel 1-D convolutions of widths 3, 4, 5 (n-gram detectors) -> ReLU -> max
over each text's valid windows -> dropout -> linear classifier.

Inputs are (N, T) int64 token ids padded with 0 at the end. A batch is trimmed to its
longest text (at least the widest filter), and windows that start past a text's end are
left out of the max, so a text's output does not depend on the padding after it.
"""

from __future__ import annotations

import torch
from torch import nn

from trainscale.models.text_rnn import PAD_ID, trim_to_longest


class TextCNN(nn.Module):
    """Embedding + convolutions of several widths + max-over-time pooling + linear."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        embed_dim: int = 128,
        widths: tuple[int, ...] = (3, 4, 5),
        filters: int = 100,
        dropout: float = 0.5,
    ):
        super().__init__()
        self.widths = widths
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.convs = nn.ModuleList(nn.Conv1d(embed_dim, filters, w) for w in widths)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(filters * len(widths), num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, lengths = trim_to_longest(x, min_len=max(self.widths))
        embedded = self.embedding(x).transpose(1, 2)  # (N, E, T): Conv1d wants channels first
        pooled = []
        for width, conv in zip(self.widths, self.convs, strict=True):
            features = torch.relu(conv(embedded))  # (N, F, T - width + 1)
            # A window is valid if it starts inside the text and, when the text is at least
            # `width` long, ends inside it; a shorter text keeps its first window (padded
            # with the zero pad embedding, the same whatever padding follows).
            last_start = (lengths - width).clamp(min=0)
            starts = torch.arange(features.shape[2], device=x.device)
            valid = starts[None, :] <= last_start[:, None]
            pooled.append(features.masked_fill(~valid.unsqueeze(1), float("-inf")).amax(dim=2))
        return self.classifier(self.dropout(torch.cat(pooled, dim=1)))
