"""The run's inputs as the JAX models take them: images in NHWC, augmentation on NHWC
batches, and token-id batches trimmed to a few bucketed widths.

Images are converted once for the whole in-memory set (NCHW -> NHWC, XLA's fast CPU
layout). The workload's augmentation (random crop and flip) is written for (N, C, H, W)
batches; an NHWC batch is handed to it as the NCHW view of the same memory (a channels_last
tensor), whose layout it keeps, and its result is viewed back as NHWC: no copy either way.

Texts: every batch is padded to the data's full width, and a jitted step compiles once per
input shape. Trimming each batch to its longest text, as the PyTorch models do, would
compile a step for almost every batch; trimming to the next of a few widths (16, 24, 32,
48, 64, 96, ...: powers of two and 1.5 times them, at most a third of a batch is padding
beyond its longest text, capped at the data's width) bounds the compilations to about two
per doubling of text length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from trainscale.workloads.base import Workload

SMALLEST_WIDTH = 16
"""The narrowest bucket: shorter texts are padded to it (a step on fewer tokens saves
nothing measurable)."""


def is_image_set(x: torch.Tensor) -> bool:
    """Whether `x` holds images, (N, C, H, W)."""
    return x.dim() == 4


def is_token_set(x: torch.Tensor) -> bool:
    """Whether `x` holds token ids, (N, T) integers padded with 0 at the end."""
    return x.dim() == 2 and not x.dtype.is_floating_point


def to_nhwc(x: torch.Tensor) -> torch.Tensor:
    """An image set (N, C, H, W) as a contiguous (N, H, W, C) tensor; other inputs as they
    are."""
    if not is_image_set(x):
        return x
    return x.permute(0, 2, 3, 1).contiguous()


def nhwc_augment(
    augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor],
) -> Callable[[torch.Tensor, torch.Generator], torch.Tensor]:
    """`augment`, written for (N, C, H, W) batches, applied to an (N, H, W, C) batch."""

    def apply(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        # The NCHW view of an NHWC batch is channels_last; the augmentation keeps the
        # memory format, so viewing its result back as NHWC is a contiguous tensor again.
        out = augment(x.permute(0, 3, 1, 2), generator)
        return out.permute(0, 2, 3, 1).contiguous()

    return apply


def for_nhwc(workload: Workload) -> Workload:
    """The workload with its augmentation taking NHWC batches (unchanged without one)."""
    if workload.augment is None:
        return workload
    return replace(workload, augment=nhwc_augment(workload.augment))


def bucket_width(length: int, full_width: int) -> int:
    """The bucketed width for a batch whose longest text has `length` tokens: the smallest
    of 16, 24, 32, 48, 64, ... (2^k and 1.5 x 2^k) at least `length`, at most `full_width`."""
    width = SMALLEST_WIDTH
    while width < length:
        # 16 -> 24 -> 32 -> 48 -> 64: alternately x1.5 and x4/3.
        width = width * 3 // 2 if width & (width - 1) == 0 else width * 4 // 3
    return min(width, full_width)


def longest_text(x: torch.Tensor) -> int:
    """Tokens in the longest text of a batch of token ids (0 = padding, at the end)."""
    lengths = (x != 0).sum(dim=1)
    return int(lengths.max()) if lengths.numel() else 0


def host_batch(x: torch.Tensor, width: int | None = None) -> np.ndarray:
    """A batch as the numpy array the JAX step takes: float32 images and vectors (no copy),
    token ids as int32 (JAX's default integer) trimmed to `width`."""
    if is_token_set(x):
        if width is not None:
            x = x[:, :width]
        return x.to(torch.int32).numpy()
    return x.numpy()


def host_labels(y: torch.Tensor) -> np.ndarray:
    """Class labels as int32."""
    return y.to(torch.int32).numpy()
