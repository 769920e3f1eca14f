"""The nodes of a run agree on its settings, checked once the workers have met."""

from __future__ import annotations

import pytest

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.runner.node_agreement import NODE_LOCAL, check_nodes_agree, shared_settings
from trainscale.runner.resolve import resolve

BASE = {"workload": "mnist-cnn", "data": "synthetic", "steps": 10, "threads_per_worker": 1}


def _settings(**changes):
    return shared_settings(resolve(RunOptions.of(**{**BASE, **changes})))


def test_nodes_started_alike_agree_whatever_each_plans_for_itself():
    check_nodes_agree([_settings(), _settings(threads_per_worker=2, affinity="none")])
    assert {"threads_per_worker", "core_sets", "data_dir"} <= NODE_LOCAL


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"batch_size": 16}, "batch_size"),
        ({"precision": "bf16"}, "precision"),
        ({"steps": 20}, "steps"),
        ({"workload": "mnist-dbn"}, "workload"),
        ({"workers": 2}, "workers"),
    ],
)
def test_a_node_started_otherwise_is_one_line_naming_the_setting(change, key):
    rank_0 = _settings(precision="fp32")
    other = _settings(**{"precision": "fp32", **change})
    with pytest.raises(ConfigError, match=f"different settings: {key} is ") as error:
        check_nodes_agree([rank_0, rank_0, other])
    assert "where rank 2 runs" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(("local_workers", "fits"), [(1, False), (2, True)], ids=["uneven", "even"])
def test_torchrun_nodes_of_different_nproc_per_node_are_refused_before_a_row(
    monkeypatch, tmp_path, local_workers, fits
):
    # Two nodes, one started with --nproc-per-node 1 and one with 2: 3 workers in all. The
    # node of 1 divides 3 evenly, yet 2 nodes x 1 is not 3.
    from trainscale.runner import launch

    environ = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "4" if fits else "3"}
    environ |= {"LOCAL_WORLD_SIZE": str(local_workers), "GROUP_WORLD_SIZE": "2"}
    environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999", "GROUP_RANK": "0"}
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(launch, "prepare", lambda opts: (_ for _ in ()).throw(RuntimeError("on")))
    opts = RunOptions.of(**BASE)
    if fits:
        with pytest.raises(RuntimeError, match="on"):  # past the check, to the preparation
            launch._join_external(opts, tmp_path / "s.db", quiet=True)
        return
    with pytest.raises(ConfigError, match="the same number of workers on every node"):
        launch._join_external(opts, tmp_path / "s.db", quiet=True)
    assert not (tmp_path / "s.db").exists()
