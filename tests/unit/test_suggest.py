"""The "did you mean" of error lines: the closest known name, and none when none is close."""

from __future__ import annotations

import pytest

from trainscale.config.suggest import did_you_mean, nearest_name
from trainscale.errors import ConfigError
from trainscale.parallel.affinity import parse_affinity
from trainscale.simulator.cluster import load_preset
from trainscale.sweeps.recipes import recipe_spec
from trainscale.workloads import get_workload


def test_the_closest_name_or_none():
    assert nearest_name("wrokers", ["workers", "steps", "lr"]) == "workers"
    assert nearest_name("zzzz", ["workers", "steps", "lr"]) is None
    assert did_you_mean("scalng", ["platforms", "scaling"]) == " (did you mean scaling?)"
    assert did_you_mean("zzzz", ["platforms", "scaling"]) == ""


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (
            lambda: get_workload("mnist-cn"),
            "unknown workload 'mnist-cn' (did you mean mnist-cnn?);",
        ),
        (
            lambda: recipe_spec("scalng", quick=True),
            "unknown recipe 'scalng' (did you mean scaling?);",
        ),
        (
            lambda: parse_affinity("compct"),
            "unknown --affinity 'compct' (did you mean compact?); use none, compact, spread",
        ),
        (
            lambda: load_preset("v100-nvlink"),
            "unknown cluster preset 'v100-nvlink' (did you mean v100-nvlink-ib?);",
        ),
    ],
)
def test_unknown_names_suggest_the_known_one(call, said):
    with pytest.raises(ConfigError) as error:
        call()
    assert str(error.value).startswith(said)
