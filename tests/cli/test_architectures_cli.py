"""The ImageNet architectures on the command line: simulated from a cluster preset, refused
for real data and other frameworks in one line, listed apart from the workloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainscale.workloads import architecture_names, workload_names

from tests.helpers.cli import one_error_line, run_cli

RESNET50_PARAMS = 25_557_032
"""torchvision's published count (https://pytorch.org/vision/stable/models/generated/
torchvision.models.resnet50.html)."""


def test_simulate_resnet50_on_the_v100_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "none.db"
    argv = ["simulate", "resnet50", "--cluster", "v100-nvlink-ib", "--workers", "1,8,32"]
    assert run_cli([*argv, "--store", str(store), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["workload"] == "resnet50"
    # No stored run: compute comes from the preset's peak, and the gradients are ResNet-50's.
    assert report["calibration"]["source"] == "peak"
    assert report["calibration"]["reference_batch_size"] == 256
    gradients = report["gradients"]
    assert gradients["num_params"] == RESNET50_PARAMS
    assert gradients["total_bytes"] == 4 * RESNET50_PARAMS
    assert gradients["weights_from"] == "flops"
    rows = report["predictions"]
    assert [row["workers"] for row in rows] == [1, 8, 32]
    assert [row["global_batch"] for row in rows] == [256, 2048, 8192]
    assert rows[0]["comm_s"] == 0 and all(row["comm_s"] > 0 for row in rows[1:])
    rates = [row["samples_per_s"] for row in rows]
    assert rates == sorted(rates) and rates[2] < 32 * rates[0]
    assert not store.exists()  # a prediction from a preset stores nothing


def test_running_an_architecture_on_real_data_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(["run", "resnet50", "--steps", "1", "--store", str(tmp_path / "r.db")])
    assert code == 2
    assert one_error_line(capsys) == (
        "trainscale: error: resnet50 is an architecture for the simulator and synthetic runs: "
        "trainscale ships no ImageNet loader; use --data synthetic"
    )
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("framework", ["tensorflow", "jax"])
def test_other_frameworks_refuse_an_architecture_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], framework: str
) -> None:
    argv = ["run", "vgg16", "--data", "synthetic", "--steps", "1", "--framework", framework]
    assert run_cli([*argv, "--store", str(tmp_path / "r.db")]) == 2
    assert one_error_line(capsys) == (
        f"trainscale: error: workload 'vgg16' has no {framework} model, only pytorch "
        "(docs/frameworks.md)"
    )


def test_workloads_lists_the_architectures_apart_with_their_parameters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["workloads", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_kind: dict[str, list[str]] = {}
    for row in rows:
        by_kind.setdefault(row["kind"], []).append(row["name"])
    assert by_kind == {"workload": workload_names(), "architecture": architecture_names()}
    resnet = next(row for row in rows if row["name"] == "resnet50")
    assert resnet["num_parameters"] == RESNET50_PARAMS
    assert resnet["input_shape"] == [3, 224, 224]
    assert resnet["frameworks"] == ["pytorch"]

    assert run_cli(["workloads"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long cells
    assert "architectures for the simulator and synthetic runs" in out
    assert "138,357,544" in out and "3x299x299" in out


def test_workloads_describes_one_architecture_only_in_its_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["workloads", "inception-v3"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "23,834,568" in out
    assert "trainscale workloads" not in out  # no empty reference table
