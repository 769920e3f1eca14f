"""What the ImageNet architectures share: 1000 classes, synthetic images of the real input
size, and no real dataset.

trainscale ships no ImageNet loader (the dataset is 150 GB of JPEG files behind a licence):
these workloads exist for the simulator, which needs only the model, and for synthetic runs,
which measure throughput. Asking for real data fails in one line that says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from trainscale.data.synthetic import synthetic_images
from trainscale.data.tensors import DataRequest, DataSize, TensorData
from trainscale.errors import DataNotFound
from trainscale.workloads.base import PYTORCH, Recipe, Workload

NUM_CLASSES = 1000
IMAGENET_SIZE = DataSize(num_train=1_281_167, num_test=50_000)
"""ILSVRC-2012's training and validation images: what an epoch means in published figures."""
SYNTHETIC_SIZE = DataSize(num_train=2_560, num_test=256)
"""The synthetic stand-in's size, far below ImageNet's on purpose: every worker holds the
whole set as float32 tensors (2,560 images of 3x224x224 are 1.4 GiB, of 3x299x299 2.5 GiB,
held twice while loading), and a synthetic epoch means nothing but a reshuffle. 2,560 is ten
batches of 256, so 8 workers at the recipes' batch of 256 still get a full batch each."""


def no_real_data(name: str) -> Callable[[DataRequest], Any]:
    """`locate_real` and `load_real` of an architecture: DataError, in one line."""

    def refuse(request: DataRequest) -> Any:
        raise DataNotFound(
            f"{name} is an architecture for the simulator and synthetic runs: trainscale "
            "ships no ImageNet loader; use --data synthetic"
        )

    return refuse


def synthetic_imagenet(image_size: int) -> Callable[[DataRequest], TensorData]:
    """Random N(0,1) images of 3 x `image_size` x `image_size` with uniform labels over the
    1000 classes, `SYNTHETIC_SIZE` of them unless the request asks for fewer."""

    def make(request: DataRequest) -> TensorData:
        return synthetic_images(
            request.seed,
            (3, image_size, image_size),
            NUM_CLASSES,
            request.max_train or SYNTHETIC_SIZE.num_train,
            request.max_test or SYNTHETIC_SIZE.num_test,
        )

    return make


def imagenet_workload(
    name: str,
    description: str,
    build: Callable[[int], nn.Module],
    image_size: int,
    target_accuracy: float,
    recipe: Recipe,
) -> Workload:
    """The spec of an ImageNet architecture: `build(num_classes)` makes its model."""

    def model(meta: Mapping[str, Any]) -> nn.Module:
        return build(int(meta.get("num_classes", NUM_CLASSES)))

    refuse = no_real_data(name)
    return Workload(
        name=name,
        description=description,
        models={PYTORCH: model},
        locate_real=refuse,
        load_real=refuse,
        make_synthetic=synthetic_imagenet(image_size),
        synthetic_size=SYNTHETIC_SIZE,
        target_accuracy=target_accuracy,
        recipe=recipe,
        channels_last=True,
        real_data=False,
    )
