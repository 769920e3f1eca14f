"""The machine of a stored run, typed: what each reader got from `record.env.get` with its own
type check, said once (results/stored_machine.py)."""

from __future__ import annotations

from trainscale.hardware.facts import collect_environment
from trainscale.results.stored_machine import StoredMachine


def test_this_machines_facts_read_back_as_collected():
    env = collect_environment()
    machine = StoredMachine.of(env)
    assert machine.hostname == env["hostname"] and machine.cpu_model == env["cpu_model"]
    assert machine.usable_cores == tuple(env["usable_cores"]) and machine.cores >= 1
    assert machine.logical_cores == env["logical_cores"]
    assert machine.torch_version == env["torch_version"]
    assert len(machine.gpu_names) == len(env["gpus"])


def test_an_environment_without_facts_knows_nothing():
    assert StoredMachine.of({}) == StoredMachine()
    assert StoredMachine().cores is None and StoredMachine().gpu_name is None


def test_facts_of_the_wrong_type_are_unknown():
    edited = {
        "hostname": ["box"],  # failed a report's set of hosts when read raw
        "cpu_model": 7,
        "logical_cores": True,
        "usable_cores": "0-3",
        "gpus": {"name": "H100"},
        "torch_version": None,
        "framework": "jax 0.11",
    }
    assert StoredMachine.of(edited) == StoredMachine()


def test_cores_and_gpus_keep_what_is_readable():
    machine = StoredMachine.of(
        {
            "usable_cores": [0, 1, "2", True, 3],
            "logical_cores": 8,
            "gpus": [{"uuid": "x"}, {"name": "NVIDIA H200"}, "NVIDIA H200"],
            "framework": {"name": "jax", "version": "0.11.0"},
        }
    )
    assert machine.usable_cores == (0, 1, 3) and machine.cores == 3
    assert machine.gpu_names == ("", "NVIDIA H200", "NVIDIA H200")
    assert machine.gpu_name == "NVIDIA H200" and machine.framework_version == "0.11.0"
    assert StoredMachine.of({"logical_cores": 8}).cores == 8  # no affinity mask recorded
    assert StoredMachine(hostname="h", cpu_model="c", gpu_names=("", "g")).names == ("c", "h", "g")
