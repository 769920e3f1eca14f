"""The CIFAR ResNet (architecture) and the `cifar10-resnet44` workload, down to a stored run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from trainscale.cli import main
from trainscale.data.tensors import DataRequest
from trainscale.models.resnet_cifar import ResNetCifar, ZeroPadShortcut, resnet_cifar
from trainscale.results.store import RunStore
from trainscale.train.flops import count_flops_per_sample
from trainscale.workloads import get_workload, workload_names
from trainscale.workloads.cifar10_resnet44 import CIFAR10_MEAN, CIFAR10_STD

from tests.helpers.cifar_files import write_python

# Multiply-accumulates of one forward pass of ResNet-44 on a 32x32 image, by hand: the stem,
# 14 convs per stage at 32, 16 and 8 pixels a side (2.36M MACs each, except the first conv
# of stages 2 and 3 at half that), and the 64x10 classifier.
RESNET44_MACS = 3 * 16 * 9 * 32 * 32 + 14 * 2_359_296 + 2 * (1_179_648 + 13 * 2_359_296) + 640
STEM_MACS = 3 * 16 * 9 * 32 * 32


def num_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# --- architecture -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("depth", "params"),
    [(20, 269_722), (32, 464_154), (44, 658_586), (56, 853_018), (110, 1_727_962)],
)
def test_depths_layers_and_parameter_counts(depth: int, params: int) -> None:
    model = resnet_cifar(depth)
    weighted = [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert len(weighted) == depth  # 6n+2 weighted layers
    assert num_params(model) == params


def test_resnet44_has_the_papers_066m_parameters() -> None:
    model = resnet_cifar(44)
    assert isinstance(model, ResNetCifar) and len(model.blocks) == 3 * 7
    assert num_params(model) == pytest.approx(0.66e6, rel=0.01)
    widths = [block.conv2.out_channels for block in model.blocks]
    assert widths == [16] * 7 + [32] * 7 + [64] * 7
    assert model.fc.in_features == 64 and model.fc.out_features == 10


@pytest.mark.parametrize("depth", [0, 7, 21, 45])
def test_depth_must_be_6n_plus_2(depth: int) -> None:
    with pytest.raises(ValueError, match="6n\\+2"):
        resnet_cifar(depth)


def test_option_a_shortcut_subsamples_and_zero_pads() -> None:
    shortcut = ZeroPadShortcut(16, 32)
    assert list(shortcut.parameters()) == []
    x = torch.randn(2, 16, 8, 8)
    out = shortcut(x)
    assert out.shape == (2, 32, 4, 4)
    assert torch.equal(out[:, 8:24], x[:, :, ::2, ::2])
    assert out[:, :8].abs().sum() == 0 and out[:, 24:].abs().sum() == 0


def test_output_shape_and_channels_last() -> None:
    torch.manual_seed(0)
    model = resnet_cifar(20).eval()
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        expected = model(x)
        model_cl = model.to(memory_format=torch.channels_last)
        got = model_cl(x.contiguous(memory_format=torch.channels_last))
    assert expected.shape == (3, 10)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    model_cl.train()
    model_cl(x.contiguous(memory_format=torch.channels_last)).sum().backward()
    assert all(p.grad is not None for p in model_cl.parameters())


def test_he_init() -> None:
    torch.manual_seed(0)
    model = resnet_cifar(44)
    conv = model.blocks[-1].conv2  # 64 -> 64, 3x3: fan_out = 576
    assert conv.weight.std().item() == pytest.approx((2 / 576) ** 0.5, rel=0.05)
    assert torch.equal(model.bn.weight, torch.ones(16)) and model.fc.bias.abs().sum() == 0


def test_flops_per_sample_counted_for_the_workload() -> None:
    workload = get_workload("cifar10-resnet44")
    model = workload.build_model({"num_classes": 10}).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    flops = count_flops_per_sample(model, x, torch.tensor([1, 2]), workload)
    # Forward 2 FLOPs per MAC; backward the same again for weight gradients, and for input
    # gradients everywhere but the stem (the images need no gradient).
    assert flops == 6 * RESNET44_MACS - 2 * STEM_MACS == 582_160_128


# --- the workload -----------------------------------------------------------------------------


def test_workload_spec() -> None:
    assert "cifar10-resnet44" in workload_names()
    workload = get_workload("cifar10-resnet44")
    recipe = workload.recipe
    assert (recipe.optimizer, recipe.lr, recipe.batch_size) == ("sgd", 0.1, 128)
    assert (recipe.momentum, recipe.weight_decay, recipe.schedule) == (0.9, 1e-4, "step")
    # 164 epochs of 390 full batches: the paper's 64k iterations, to 40 steps.
    assert abs(recipe.epochs * (50_000 // 128) - 64_000) <= 40
    assert workload.target_accuracy == 0.925
    assert workload.channels_last and workload.augment is not None


def test_synthetic_has_the_real_shapes() -> None:
    workload = get_workload("cifar10-resnet44")
    data = workload.make_synthetic(DataRequest(seed=3, max_train=12, max_test=5))
    assert data.train_x.shape == (12, 3, 32, 32) and data.test_x.shape == (5, 3, 32, 32)
    assert data.kind == "synthetic" and data.meta["num_classes"] == 10
    assert data.train_x.is_contiguous(memory_format=torch.channels_last)
    assert int(data.train_y.max()) < 10


def test_real_tensors_are_normalised_per_channel(tmp_path) -> None:
    write_python(tmp_path, 4)
    workload = get_workload("cifar10-resnet44")
    data = workload.load_real(DataRequest(data_dir=tmp_path, download=False, max_train=6))
    assert data.kind == "real" and data.source == str(tmp_path)
    assert data.train_x.shape == (6, 3, 32, 32) and data.test_x.shape == (4, 3, 32, 32)
    assert data.train_x.dtype == torch.float32 and data.train_y.dtype == torch.int64
    # Stored in the layout the trainer uses for this workload: no second copy is made.
    assert data.train_x.is_contiguous(memory_format=torch.channels_last)
    from trainscale.data.cifar import load_cifar10

    raw = load_cifar10(tmp_path, download=False)
    pixel = raw.train_images[0, :, 5, 7] / 255.0
    expected = (pixel - np.array(CIFAR10_MEAN)) / np.array(CIFAR10_STD)
    np.testing.assert_allclose(data.train_x[0, :, 5, 7].numpy(), expected, rtol=1e-5)
    model = workload.build_model(data.meta)
    x = workload.augment(data.train_x, torch.Generator().manual_seed(0))
    workload.loss(model(x), data.train_y).backward()


# --- end to end through the CLI ------------------------------------------------------------------

FAST = ["--steps", "2", "--batch-size", "8", "--warmup-steps", "0", "--quiet", "--json"]


@pytest.fixture
def isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    monkeypatch.chdir(tmp_path)


def test_two_worker_synthetic_run_stores_flops(isolated_home, store_path, capsys) -> None:
    code = main(
        [
            "run",
            "cifar10-resnet44",
            "--data",
            "synthetic",
            *FAST,
            "--workers",
            "2",
            "--threads-per-worker",
            "1",
            "--allow-oversubscribe",
            "--store",
            str(store_path),
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "completed" and result["world_size"] == 2
    assert result["data"] == "synthetic" and result["test_accuracy"] is None
    with RunStore(store_path) as store:
        record = store.get_run(result["run_id"])
        assert len(store.step_times(result["run_id"])) == 2
    assert record.summary["flops_per_sample"] == 582_160_128
    assert record.config["schedule"] == "step" and record.config["channels_last"]


def test_run_on_generated_release_files(isolated_home, tmp_path, store_path, capsys) -> None:
    data_dir = tmp_path / "cifar-10-batches-py"
    write_python(data_dir, 4)
    code = main(
        [
            "run",
            "cifar10-resnet44",
            "--data-dir",
            str(tmp_path),
            "--no-download",
            "--schedule",
            "step",
            *FAST,
            "--threads-per-worker",
            "1",
            "--store",
            str(store_path),
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["data"] == "real" and result["status"] == "completed"
    assert 0.0 <= result["test_accuracy"] <= 1.0  # 4 generated test images: no claim
    with RunStore(store_path) as store:
        record = store.get_run(result["run_id"])
    assert record.summary["data_source"] == str(data_dir)
    assert record.summary["flops_per_sample"] == 582_160_128


def test_missing_data_is_one_line(isolated_home, tmp_path, store_path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ["run", "cifar10-resnet44", "--data-dir", str(empty), "--no-download"]
    assert main([*args, "--store", str(store_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cifar-10-batches-py" in err and str(empty) in err
