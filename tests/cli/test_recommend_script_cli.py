"""`trainscale recommend SCRIPT.py -- ARGS` end to end: the example script searched over its
placements in real, tiny script runs, each stopped by the meter after its trial's steps."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from trainscale.cli import main
from trainscale.hardware import facts
from trainscale.results.store import RunStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist_script.py"
ARGS = ["--train-samples", "512", "--test-samples", "64"]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRAINSCALE_FAULT_INJECT", raising=False)
    monkeypatch.chdir(tmp_path)


def test_a_tiny_search_of_the_example_script(tmp_path, capsys, monkeypatch):
    """One rung of 2 timed steps after 1 warm-up step on 2 cores (3 placements, whatever
    the machine): about 30 s."""
    real = facts.collect_environment()
    two = {**real, "usable_cores": real["usable_cores"][:2], "numa_nodes": []}
    monkeypatch.setattr(facts, "collect_environment", lambda: two)
    store = tmp_path / "r.db"
    argv = ["recommend", str(EXAMPLE), "--quick", "--rung-steps", "2", "--warmup-steps", "1"]
    # Real trials on a shared test machine may well be busy: this test is about the search
    # end to end, not about leaving busy trials out (test_recommend.py is).
    argv += ["--data", "synthetic", "--include-busy"]
    code = main([*argv, "--store", str(store), "--json", "--", *ARGS])
    assert code == 0
    data = json.loads(capsys.readouterr().out)  # stdout: the JSON document alone
    assert data["script"] == str(EXAMPLE) and data["workload"] == "script:mnist_script.py"
    assert not data["accuracy_checked"] and "accuracy NOT checked" in data["data_note"]
    labels = [c["label"] for c in data["space"]["candidates"]]
    assert labels == ["1w x 1t compact", "1w x 2t compact", "2w x 1t compact"]
    assert all(
        c["precision"] is None and c["batch_size"] is None for c in data["space"]["candidates"]
    )
    words = shlex.split(data["command"])
    assert words[:3] == ["trainscale", "run", str(EXAMPLE)]
    assert words[words.index("--") :] == ["--", *ARGS]
    assert {"--workers", "--threads-per-worker", "--affinity", "--data"} <= set(words)
    with RunStore(store) as runs:
        stored = runs.list_runs(tag=data["tag"])
    assert len(stored) == len(data["trials"])
    assert all(r.status == "completed" for r in stored), [r.error for r in stored]
    assert {r.workload for r in stored} == {"script:mnist_script.py"}
    assert {r.config["max_steps"] for r in stored} == {3}  # stopped by the meter
    assert {r.config["script_args"] == ARGS for r in stored} == {True}
    # Each worker trains the script's own batch of 64: the global batch grows with them.
    batches = {r.world_size: r.global_batch_size for r in stored}
    assert batches[1] == 64 and batches[2] == 128
