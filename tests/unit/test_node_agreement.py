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
