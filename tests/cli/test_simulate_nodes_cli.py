"""`--nodes` grows a preset's node count, so predictions reach 16 nodes and beyond."""

from __future__ import annotations

import json

from tests.helpers.cli import one_error_line, run_cli


def test_nodes_lets_a_preset_reach_64_workers(tmp_path, capsys):
    store = str(tmp_path / "none.db")
    # The K80 preset describes 2 nodes of 4 GPUs; --nodes 16 takes it to 64.
    args = ["simulate", "cifar10-resnet44", "--cluster", "k80-pcie-ib", "--store", store]
    assert run_cli([*args, "--workers", "64"]) == 2
    assert "8 devices (2 node(s) x 4); 64 workers do not fit" in one_error_line(capsys)
    assert run_cli([*args, "--nodes", "16", "--workers", "1,64", "--json"]) == 0
    predictions = json.loads(capsys.readouterr().out)["predictions"]
    assert [(p["workers"], p["nodes"]) for p in predictions] == [(1, 1), (64, 16)]
    assert 0 < predictions[1]["efficiency"] < 1


def test_nodes_needs_an_inter_node_link_and_is_not_for_validation(tmp_path, capsys):
    store = str(tmp_path / "none.db")
    assert run_cli(["simulate", "mnist-cnn", "--nodes", "2", "--store", store]) == 2
    assert one_error_line(capsys) == (
        "trainscale: error: cluster 'local' has no inter-node link, so one node only; "
        "--nodes 2 needs a cluster file with an [inter_node] section"
    )
    assert run_cli(["simulate", "--validate", "--nodes", "2", "--store", store]) == 2
    assert "--nodes is for predictions" in one_error_line(capsys)
    assert run_cli(["simulate", "mnist-cnn", "--nodes", "0", "--store", store]) == 2
    assert "--nodes" in one_error_line(capsys)
