"""Bidirectional LSTM / GRU text classifier: architecture only.

embedding -> dropout -> 1-layer bidirectional LSTM or GRU over packed sequences -> max and
mean pooling over each text's real tokens -> dropout -> linear classifier.

Inputs are (N, T) int64 token ids padded with 0 at the end (`trainscale.data.text`). Each
batch is first trimmed to its longest text, so a batch costs its own length, not the
dataset's maximum. Packing (`pack_padded_sequence`) makes the backward direction start at
each text's last real token: no direction ever reads padding, so a text's output does not
depend on how much padding follows it.

On the CPU in bf16 the recurrent layer's matrix products run in oneDNN, which
builds and caches a kernel for every distinct shape. torch's packed LSTM/GRU projects all of
a batch's tokens in one product whose row count is the batch's token total, a new number
almost every batch: the kernels, and the memory freed and reallocated around them, then
grew without bound over a run (6.9 GB for a 4-epoch BiGRU on IMDB). There a batch of mixed
lengths gets filler texts (zero embeddings, dropped before pooling) that bring its token
total up to a multiple of `TOKEN_GRANULE`, so a run sees a bounded set of shapes. Each text
is computed on its own row, so the real texts' outputs and gradients are unchanged.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD_ID = 0  # trainscale.data.text.PAD_ID (not imported: models do not depend on data code)
CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}
TOKEN_GRANULE = 256
"""A mixed-length batch's token total is rounded up to a multiple of this on the oneDNN path:
at most 100 distinct totals for IMDB's 64 x 400 training batches and 313 for its 200 x 400
evaluation batches, for at most 255 filler tokens (under 2% of a typical IMDB batch)."""


def trim_to_longest(x: torch.Tensor, min_len: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(x cut to the batch's longest text, or padded to `min_len` columns; lengths >= 1)."""
    lengths = (x != PAD_ID).sum(dim=1).clamp_(min=1)
    width = max(int(lengths.max()), min_len)
    if x.shape[1] < width:
        x = nn.functional.pad(x, (0, width - x.shape[1]), value=PAD_ID)
    return x[:, :width], lengths


def rnn_compute_dtype(device_type: str, autocast_dtype: torch.dtype | None) -> torch.dtype:
    """The dtype the recurrent layer computes in on `device_type` under an autocast to
    `autocast_dtype` (None: no autocast).

    CUDA's autocast casts `_cudnn_rnn` to fp16 whatever the autocast dtype, so under a bf16
    autocast the LSTM/GRU would compute in fp16 with no loss scaler while the run is stored
    as bf16: there it runs in fp32 instead. Under fp16 autocast fp16 is what was asked for
    (and a GradScaler exists); on the CPU a bf16 autocast computes in bf16.
    """
    if autocast_dtype is None:
        return torch.float32
    if device_type == "cuda" and autocast_dtype == torch.bfloat16:
        return torch.float32
    return autocast_dtype


def _autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype of the autocast active on `device_type`, or None when there is none."""
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def uses_shape_cache(device_type: str, compute_dtype: torch.dtype) -> bool:
    """Whether the recurrent layer's matrix products may go through oneDNN's per-shape kernel
    cache: on the CPU in bf16, and in fp16 where the CPU has fp16 matrix instructions (fp32
    products go to the BLAS, which caches none)."""
    return device_type == "cpu" and compute_dtype in (torch.bfloat16, torch.float16)


def filler_lengths(lengths: torch.Tensor, width: int, granule: int) -> torch.Tensor:
    """Lengths (each at most `width`) of the filler texts that bring `lengths`' total up to a
    multiple of `granule`; none for a batch whose texts are all as long (its total is
    already one of at most `max_len` values, and an LSTM keeps its fused kernel there)."""
    missing = -int(lengths.sum()) % granule
    if missing == 0 or bool((lengths == lengths[0]).all()):
        return lengths.new_empty(0)
    full, rest = divmod(missing, width)
    return lengths.new_tensor([width] * full + ([rest] if rest else []))


def valid_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(N, width) bool: True at each text's real positions."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


class TextRNN(nn.Module):
    """Embedding + bidirectional LSTM/GRU + max-and-mean pooling + linear classifier."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        cell: str = "lstm",
        embed_dim: int = 128,
        hidden_size: int = 128,
        dropout: float = 0.5,
    ):
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {', '.join(CELLS)}, got {cell!r}")
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.rnn = CELLS[cell](embed_dim, hidden_size, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        # Max pooling keeps the strongest evidence wherever it occurs in a long review; mean
        # pooling keeps its overall tone. Both beat the last hidden state on long texts
        # (Johnson & Zhang 2016 on pooling LSTM outputs).
        self.classifier = nn.Linear(4 * hidden_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, lengths = trim_to_longest(x)
        embedded = self.dropout(self.embedding(x))
        device_type = embedded.device.type
        autocast_dtype = _autocast_dtype(device_type)
        compute_dtype = rnn_compute_dtype(device_type, autocast_dtype)
        texts, width = x.shape
        fillers = lengths.new_empty(0)
        if uses_shape_cache(device_type, compute_dtype):
            fillers = filler_lengths(lengths, width, TOKEN_GRANULE)
        if len(fillers):
            # Zero rows: each text's row is computed on its own, and these are cut off below.
            extra = embedded.new_zeros(len(fillers), width, embedded.shape[2])
            embedded = torch.cat([embedded, extra])
        packed = pack_padded_sequence(
            embedded, torch.cat([lengths, fillers]).cpu(), batch_first=True, enforce_sorted=False
        )
        if autocast_dtype is not None and compute_dtype == torch.float32:
            # Autocast would pick fp16 for the cuDNN RNN: run it outside autocast, in fp32.
            with torch.autocast(device_type, enabled=False):
                out, _ = self.rnn(packed.float())
        else:
            out, _ = self.rnn(packed)
        # Padding positions come back as zeros: they add nothing to the sum below.
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=width)
        out = out[:texts]
        mask = valid_mask(lengths, width).unsqueeze(-1)
        mean = out.sum(dim=1) / lengths.unsqueeze(1).to(out.dtype)
        most = out.masked_fill(~mask, float("-inf")).amax(dim=1)
        return self.classifier(self.dropout(torch.cat([most, mean], dim=1)))
