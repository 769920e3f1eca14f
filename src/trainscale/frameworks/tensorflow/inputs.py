"""The training inputs as the Keras models take them: images NHWC, everything else as is.

The whole in-memory training set is converted once, to torch's channels_last layout: still
an (N, C, H, W) tensor to torch, so the batch gatherer and the workload's augmentation
(`random_crop_flip` reads N, C, H, W from the shape and keeps the layout) work unchanged,
but with NHWC bytes, so each batch reaches TensorFlow as a zero-copy NHWC view.
"""

from __future__ import annotations

import numpy as np
import torch


def is_image(x: torch.Tensor) -> bool:
    """Whether `x` is a batch of images (N, C, H, W)."""
    return x.dim() == 4


def training_layout(x: torch.Tensor) -> torch.Tensor:
    """The training set in the layout the batches are gathered from (images: NHWC bytes in
    an NCHW-shaped tensor), converted once."""
    return x.contiguous(memory_format=torch.channels_last) if is_image(x) else x


def to_model(x: torch.Tensor) -> np.ndarray:
    """A batch as the model takes it: NHWC images (zero-copy from `training_layout`'s),
    any other input as is."""
    if is_image(x):
        x = x.permute(0, 2, 3, 1)
    # A batch that is not NHWC in memory (a one-channel image, where either layout is the
    # same bytes, or an augmentation that changed it) is copied here, never mis-read.
    return np.ascontiguousarray(x.numpy())


def model_shape(x: torch.Tensor) -> tuple[int, ...]:
    """One sample's shape as the model takes it (NHWC images)."""
    shape = tuple(x.shape[1:])
    if is_image(x):
        channels, height, width = shape
        return height, width, channels
    return shape
