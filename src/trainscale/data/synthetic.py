"""Synthetic datasets: random tensors with the shapes and dtypes of the real ones.

They exist to measure throughput where real data is missing; results made from them are
labelled 'synthetic' and never carry an accuracy claim.
"""

from __future__ import annotations

import torch

from trainscale.data.tensors import TensorData


def synthetic_images(
    seed: int,
    image_shape: tuple[int, ...],
    num_classes: int,
    num_train: int,
    num_test: int,
) -> TensorData:
    """Standard-normal images (already "normalised") and uniform labels."""
    generator = torch.Generator().manual_seed(seed)
    return TensorData(
        train_x=torch.randn((num_train, *image_shape), generator=generator),
        train_y=torch.randint(0, num_classes, (num_train,), generator=generator),
        test_x=torch.randn((num_test, *image_shape), generator=generator),
        test_y=torch.randint(0, num_classes, (num_test,), generator=generator),
        kind="synthetic",
        source=f"synthetic: N(0,1) images {image_shape}, uniform labels, seed {seed}",
        meta={"num_classes": num_classes},
    )
