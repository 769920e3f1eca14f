"""An OpenMP binding variable (OMP_PROC_BIND, ...) makes torch's OpenMP runtime bind the
importing thread to one core: trainscale still sees the machine's share, and starts its
workers with the whole mask and without the variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, os
import trainscale, torch
from trainscale.hardware.facts import usable_cores
from trainscale.hardware.start_affinity import workers_unbound
seen = {"after_import": sorted(os.sched_getaffinity(0)), "usable": usable_cores()}
with workers_unbound():
    seen["while_starting"] = sorted(os.sched_getaffinity(0))
    seen["variable_while_starting"] = os.environ.get("OMP_PROC_BIND")
seen["after"] = sorted(os.sched_getaffinity(0))
seen["variable_after"] = os.environ.get("OMP_PROC_BIND")
print(json.dumps(seen))
"""


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs an affinity mask of two cores or more",
)
def test_an_openmp_binding_variable_does_not_shrink_the_cores_used():
    mask = sorted(os.sched_getaffinity(0))
    env = {**os.environ, "OMP_PROC_BIND": "true"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["usable"] == mask  # whatever the runtime did to the importing thread
    assert seen["while_starting"] == mask and seen["variable_while_starting"] is None
    # Afterwards the caller's thread and environment are as they were.
    assert seen["after"] == seen["after_import"] and seen["variable_after"] == "true"
