"""`import trainscale` stays cheap; the API loads on first use, and `trainscale.run` is the
API's function however the subpackage of that name was imported."""

from __future__ import annotations

import subprocess
import sys

import trainscale


def test_import_trainscale_loads_neither_the_api_nor_torch():
    code = (
        "import sys, trainscale\n"
        "assert 'trainscale.api' not in sys.modules and 'torch' not in sys.modules\n"
        "assert set(trainscale.__all__) <= set(dir(trainscale))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_run_bench_sweep_report_are_callable_packages():
    from trainscale.api import calls
    from trainscale.run.launch import execute_run  # the subpackage, imported as a package

    assert execute_run is trainscale.run.launch.execute_run
    for name in ("run", "bench", "sweep", "report"):
        package = getattr(trainscale, name)
        assert callable(package)
        assert package._function() is getattr(calls, name)
    assert trainscale.compare is calls.compare and trainscale.runs is calls.runs
