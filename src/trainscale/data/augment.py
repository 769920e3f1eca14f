"""Training augmentations on whole batch tensors: one gather per batch, no loop over samples."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def random_crop_flip(
    x: torch.Tensor, generator: torch.Generator, padding: int = 4, flip_p: float = 0.5
) -> torch.Tensor:
    """Zero-pad by `padding`, crop a random window of the original size per sample, and flip
    each sample left-right with probability `flip_p` (He et al. 2016's CIFAR augmentation).

    `x` is an (N, C, H, W) batch, NCHW or channels_last; the result has the same shape,
    dtype and memory format, and `x` is left untouched. The draws come from `generator`
    only (one set per batch), so a seeded generator gives the same batches every time.
    `generator` must be on `x`'s device: the draws are made there, so a GPU step copies
    nothing from the host. Padding is zero on the scale of `x`: on normalised images that
    is the mean colour.
    """
    n, _, height, width = x.shape
    channels_last = x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
    offsets = torch.randint(0, 2 * padding + 1, (2, n), generator=generator, device=x.device)
    flip = torch.rand(n, generator=generator, device=x.device) < flip_p
    rows = offsets[0, :, None] + torch.arange(height, device=x.device)  # (N, H)
    cols = offsets[1, :, None] + torch.arange(width, device=x.device)  # (N, W)
    # A flip is the same window read right to left: fold it into the gather.
    cols = torch.where(flip[:, None], cols.flip(1), cols)
    padded = F.pad(x, (padding, padding, padding, padding))
    # Gather in NHWC so each index picks a whole pixel (all channels) at once.
    nhwc = padded.permute(0, 2, 3, 1)
    batch = torch.arange(n, device=x.device)[:, None, None]
    out = nhwc[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)
    return out.contiguous(
        memory_format=torch.channels_last if channels_last else torch.contiguous_format
    )
