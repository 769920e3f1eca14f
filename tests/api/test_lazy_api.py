"""`import trainscale` stays cheap; the API loads on first use, and `trainscale.run` is the
API's function whatever else of trainscale was imported."""

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


def test_the_api_names_stay_the_functions_once_every_package_is_imported():
    from trainscale import api
    from trainscale.advisor.run import recommend  # noqa: F401
    from trainscale.benchmark.run import run_bench  # noqa: F401
    from trainscale.emulation.run import run_emulation  # noqa: F401
    from trainscale.probing.run import run_probe  # noqa: F401
    from trainscale.reporting.build import build_report  # noqa: F401
    from trainscale.runner.launch import execute_run  # noqa: F401
    from trainscale.simulator.run import simulate_scaling  # noqa: F401
    from trainscale.sweeps.run import run_sweep  # noqa: F401

    # No subpackage of trainscale takes an API function's name when it is imported.
    functions = ("run", "bench", "sweep", "compare", "runs", "report")
    questions = ("recommend", "simulate", "emulate", "predict_time_to_accuracy")
    machine = ("env", "probe", "probes")
    store = ("import_runs", "delete_runs")
    for name in (*functions, *questions, *machine, *store):
        assert callable(getattr(trainscale, name)), name
        assert getattr(trainscale, name) is getattr(api, name), name


def test_every_name_of_the_api_is_a_name_of_trainscale():
    from trainscale import api

    assert set(api.__all__) <= set(trainscale.__all__)
    for name in api.__all__:
        assert getattr(trainscale, name) is getattr(api, name), name
