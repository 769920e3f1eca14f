"""The example custom workload from the Python API: serially and with 2 gloo workers, named
by its file or by the function itself; functions no worker could import are refused."""

from __future__ import annotations

import importlib.util

import pytest

import trainscale
from trainscale.errors import ConfigError
from trainscale.results.store import RunStore

from tests.helpers.custom_workloads import EXAMPLE, EXAMPLE_REF, fresh_custom_workloads

pytestmark = pytest.mark.usefixtures("fresh_custom_workloads")
__all__ = ["fresh_custom_workloads"]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_example_runs_from_the_api_as_stored(tmp_path, workers):
    store = tmp_path / "runs.db"
    result = trainscale.run(EXAMPLE_REF, workers=workers, steps=150, store=store)
    assert result.workload == "spiral-mlp" and result.status == "completed"
    assert result.world_size == workers and result.test_accuracy > 0.5
    with RunStore(store) as opened:
        record = opened.get_run(result.run_id)
    assert record.config["workload_source"] == f"{EXAMPLE}:make_workload"
    assert result.samples_per_s == record.summary["samples_per_s"]
    # The runs are found by the workload's reference too.
    (found,) = trainscale.runs(workload=EXAMPLE_REF, store=store)
    assert found.run_id == result.run_id


def test_the_function_itself_names_its_file(tmp_path):
    spec = importlib.util.spec_from_file_location("my_workload", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = trainscale.run(
        module.make_workload, steps=20, data="synthetic", store=tmp_path / "r.db"
    )
    assert result.workload == "spiral-mlp"
    assert result.config["workload_source"] == f"{EXAMPLE}:make_workload"


def test_what_no_worker_can_import_is_refused_in_one_line(tmp_path):
    def make_workload():  # defined inside a function: no other process can import it
        raise AssertionError("never called")

    with pytest.raises(ConfigError, match=r"cannot be imported by the workers: workers are new"):
        trainscale.run(make_workload, store=tmp_path / "r.db")
    with pytest.raises(ConfigError, match=r"pass the function that makes workload 'spiral-mlp'"):
        trainscale.run(trainscale.workloads.get_workload(EXAMPLE_REF), store=tmp_path / "r.db")
    with pytest.raises(ConfigError, match=r"not int$"):
        trainscale.run(3, store=tmp_path / "r.db")
    assert not (tmp_path / "r.db").exists()
