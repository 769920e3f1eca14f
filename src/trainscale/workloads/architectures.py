"""Architecture-only workloads: the ImageNet models of the published scaling studies.

ResNet-50/101/152, Inception V3 and VGG-16 are what data-parallel scaling papers measured
(Goyal et al. 2017, the Horovod paper, tf_cnn_benchmarks, NVIDIA's DeepLearningExamples).
trainscale has their models, not their dataset: they answer to `get_workload(name)` so the
simulator can predict them and `--data synthetic` can run them, but they are kept apart from
the reference workloads (`workload_names()`), which train to a target on real data and have
TensorFlow and JAX twins.

Targets are the top-1 accuracies torchvision publishes for these architectures
(https://pytorch.org/vision/stable/models.html, `IMAGENET1K_V1` weights); nothing here can
reach them without ImageNet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainscale.data.tensors import DataRequest
from trainscale.models.imagenet_resnet import imagenet_resnet
from trainscale.models.inception_v3 import InceptionV3
from trainscale.models.meta_device import shapes_only
from trainscale.models.vgg import Vgg16
from trainscale.workloads.base import Recipe, Workload
from trainscale.workloads.imagenet import imagenet_workload

_ARCHITECTURES: dict[str, Callable[[], Workload]] = {}


def _architecture(name: str) -> Callable[[Callable[[], Workload]], Callable[[], Workload]]:
    def decorate(factory: Callable[[], Workload]) -> Callable[[], Workload]:
        _ARCHITECTURES[name] = factory
        return factory

    return decorate


def architecture_names() -> list[str]:
    """The architecture-only workloads' names, sorted."""
    return sorted(_ARCHITECTURES)


def get_architecture(name: str) -> Workload | None:
    """The architecture called `name`, or None if there is none."""
    factory = _ARCHITECTURES.get(name)
    return None if factory is None else factory()


@dataclass(frozen=True)
class ArchitectureFacts:
    """What a listing shows of an architecture besides its spec."""

    num_parameters: int
    input_shape: tuple[int, ...]
    """One sample's shape, e.g. (3, 224, 224)."""


def describe_architecture(workload: Workload) -> ArchitectureFacts:
    """Its parameter count (the model built for its shapes alone, which allocates nothing
    and takes milliseconds) and its input shape."""
    sample = workload.make_synthetic(DataRequest(max_train=1, max_test=1))
    with shapes_only():
        model = workload.build_model(sample.meta)
    return ArchitectureFacts(
        num_parameters=sum(p.numel() for p in model.parameters()),
        input_shape=tuple(sample.train_x.shape[1:]),
    )


# Goyal et al. 2017 ("Accurate, Large Minibatch SGD", Sec. 5.1): SGD with momentum 0.9, lr 0.1
# per 256 images (scaled linearly with the global batch), weight decay 1e-4, 90 epochs, 5
# epochs of linear warm-up. The cosine decay and label smoothing 0.1 are those of NVIDIA's
# ResNet50 v1.5 recipe (DeepLearningExamples), in place of Goyal's steps at epochs 30/60/80.
RESNET_RECIPE = Recipe(
    optimizer="sgd",
    lr=0.1,
    batch_size=256,
    epochs=90.0,
    schedule="cosine",
    momentum=0.9,
    nesterov=False,
    weight_decay=1e-4,
    label_smoothing=0.1,
    warmup_fraction=5 / 90,
)


def _resnet(depth: int, top1: float) -> Workload:
    return imagenet_workload(
        name=f"resnet{depth}",
        description=f"ResNet-{depth} v1.5 (He et al. 2016) for ImageNet",
        build=lambda num_classes: imagenet_resnet(depth, num_classes),
        image_size=224,
        target_accuracy=top1,
        recipe=RESNET_RECIPE,
    )


@_architecture("resnet50")
def resnet50() -> Workload:
    return _resnet(50, 0.7613)


@_architecture("resnet101")
def resnet101() -> Workload:
    return _resnet(101, 0.77374)


@_architecture("resnet152")
def resnet152() -> Workload:
    return _resnet(152, 0.78312)


@_architecture("inception-v3")
def inception_v3() -> Workload:
    return imagenet_workload(
        name="inception-v3",
        description="Inception V3 (Szegedy et al. 2016), no auxiliary head",
        build=lambda num_classes: InceptionV3(num_classes),
        image_size=299,
        target_accuracy=0.77294,
        recipe=Recipe(
            # The paper trained 100 epochs at batch 32 per replica with label smoothing 0.1
            # (which it introduced) and RMSProp; trainscale offers SGD, Adam and AdamW, so SGD
            # with momentum at Goyal's 0.1 per 256 images (0.0125 at 32) stands in for
            # RMSProp, with TF-slim's weight decay for this model, 4e-5.
            optimizer="sgd",
            lr=0.0125,
            batch_size=32,
            epochs=100.0,
            schedule="cosine",
            momentum=0.9,
            nesterov=False,
            weight_decay=4e-5,
            label_smoothing=0.1,
        ),
    )


@_architecture("vgg16")
def vgg16() -> Workload:
    return imagenet_workload(
        name="vgg16",
        description="VGG-16 (Simonyan & Zisserman 2015), 4096-4096 classifier",
        build=lambda num_classes: Vgg16(num_classes),
        image_size=224,
        target_accuracy=0.71592,
        recipe=Recipe(
            # The paper's (Sec. 3.1): SGD with momentum 0.9, batch 256, lr 0.01 divided by 10
            # when validation accuracy stalled (three times in 74 epochs), weight decay 5e-4;
            # the 'step' schedule divides it at half and three quarters of the run.
            optimizer="sgd",
            lr=0.01,
            batch_size=256,
            epochs=74.0,
            schedule="step",
            momentum=0.9,
            nesterov=False,
            weight_decay=5e-4,
        ),
    )
