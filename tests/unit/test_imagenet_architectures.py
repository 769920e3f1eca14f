"""The ImageNet architectures: parameter counts and FLOPs against the published figures, the
workload contract (synthetic data only), and how they sit beside the reference workloads.

Published figures: torchvision's model documentation (https://pytorch.org/vision/stable/
models.html and each model's page, `IMAGENET1K_V1` weights), whose `num_params` are exact
counts and whose `GFLOPS` column counts multiply-accumulates (one per MAC) for one forward
pass of one image. torch's FlopCounterMode counts two FLOPs per MAC, so a forward pass
counts 2 x GFLOPS x 1e9 here.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from trainscale.data.tensors import DataRequest
from trainscale.errors import ConfigError, DataError
from trainscale.models.meta_device import shapes_only
from trainscale.simulator.buckets import layout_from_params, param_infos
from trainscale.workloads import (
    architecture_names,
    get_workload,
    is_builtin,
    workload_names,
)

# name: (input side, torchvision num_params, torchvision GFLOPS = GMACs per forward image)
PUBLISHED = {
    "resnet50": (224, 25_557_032, 4.09),
    "resnet101": (224, 44_549_160, 7.80),
    "resnet152": (224, 60_192_808, 11.51),
    "vgg16": (224, 138_357_544, 15.47),
    # Without the auxiliary classifier; torchvision's 27,161,264 includes it (3,326,696 more).
    "inception-v3": (299, 23_834_568, 5.71),
}


def meta_model(name: str) -> torch.nn.Module:
    """The workload's model built for its shapes alone, as the listing and footprint do."""
    with shapes_only():
        return get_workload(name).build_model({"num_classes": 1000})


def test_the_five_architectures_are_registered_apart() -> None:
    assert architecture_names() == sorted(PUBLISHED)
    assert not set(architecture_names()) & set(workload_names())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_get_workload_finds_it_but_it_is_no_builtin(name: str) -> None:
    spec = get_workload(name)
    assert spec.name == name
    assert not is_builtin(name)  # so --framework tensorflow|jax refuses it
    assert spec.frameworks == ["pytorch"]
    assert spec.channels_last


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_is_the_published_one(name: str) -> None:
    _, num_params, _ = PUBLISHED[name]
    assert sum(p.numel() for p in meta_model(name).parameters()) == num_params


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_forward_flops_match_the_published_macs(name: str) -> None:
    side, _, gmacs = PUBLISHED[name]
    model = meta_model(name)
    counter = FlopCounterMode(display=False)
    with counter:
        logits = model(torch.empty(1, 3, side, side, device="meta"))
    assert logits.shape == (1, 1000)
    # Published figures are rounded to two decimals (of GMACs): within 0.5%.
    assert counter.get_total_flops() == pytest.approx(2 * gmacs * 1e9, rel=0.005)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_gradient_layout_holds_four_bytes_per_parameter(name: str) -> None:
    model = meta_model(name)
    layout = layout_from_params(param_infos(model))
    assert layout.total_bytes == 4 * PUBLISHED[name][1]
    assert sum(bucket.num_bytes for bucket in layout.buckets) == layout.total_bytes


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_real_data_is_refused_in_one_line(name: str) -> None:
    spec = get_workload(name)
    expected = (
        f"{name} is an architecture for the simulator and synthetic runs: trainscale ships "
        "no ImageNet loader; use --data synthetic"
    )
    for load in (spec.locate_real, spec.load_real):
        with pytest.raises(DataError) as caught:
            load(DataRequest())
        assert str(caught.value) == expected


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_synthetic_data_has_imagenet_shapes(name: str) -> None:
    side = PUBLISHED[name][0]
    spec = get_workload(name)
    data = spec.make_synthetic(DataRequest(seed=3, max_train=4, max_test=2))
    assert data.kind == "synthetic"
    assert data.train_x.shape == (4, 3, side, side) and data.test_x.shape == (2, 3, side, side)
    assert data.meta == {"num_classes": 1000}
    assert int(data.train_y.min()) >= 0 and int(data.train_y.max()) < 1000
    # The declared full size is what a run plans with; it is small enough to hold.
    assert spec.synthetic_size is not None
    assert spec.synthetic_size.num_train * 3 * side * side * 4 < 3 * 2**30


def test_recipes_follow_the_published_setups() -> None:
    resnet = get_workload("resnet50").recipe
    assert (resnet.optimizer, resnet.lr, resnet.batch_size, resnet.momentum) == (
        "sgd",
        0.1,
        256,
        0.9,
    )
    assert (resnet.weight_decay, resnet.label_smoothing, resnet.epochs) == (1e-4, 0.1, 90.0)
    vgg = get_workload("vgg16").recipe
    assert (vgg.lr, vgg.batch_size, vgg.weight_decay) == (0.01, 256, 5e-4)
    inception = get_workload("inception-v3").recipe
    assert (inception.batch_size, inception.label_smoothing) == (32, 0.1)


def test_an_unknown_name_lists_the_architectures_too() -> None:
    with pytest.raises(ConfigError, match="architectures \\(synthetic data only\\): inception"):
        get_workload("resnet51")


# Small inputs keep the real (CPU) step cheap; the models pool adaptively, so any size
# their stride-2 layers leave at least one pixel of works (75x75 for Inception V3).
@pytest.mark.parametrize(("name", "side"), [("resnet50", 64), ("inception-v3", 75)])
def test_one_training_step_on_cpu_gives_every_parameter_a_gradient(name: str, side: int) -> None:
    torch.manual_seed(0)
    spec = get_workload(name)
    model = spec.build_model({"num_classes": 1000}).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, side, side).contiguous(memory_format=torch.channels_last)
    loss = spec.loss(model(x), torch.tensor([1, 999]), label_smoothing=0.1)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
