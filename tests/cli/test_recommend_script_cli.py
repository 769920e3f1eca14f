"""`trainscale recommend SCRIPT.py -- ARGS` end to end: the example script searched over its
placements in real, tiny script runs, each stopped by the meter after its trial's steps."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from trainscale.advisor import run as recommend_run
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


EVALUATING = '''\
"""A tiny classifier that trains well serially and to chance on several workers: each
worker shuffles its labels (the mistake), so they no longer match their samples."""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import trainscale

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int)
steps = parser.parse_args().steps
world = int(os.environ.get("WORLD_SIZE", "1"))
if world > 1:
    dist.init_process_group("gloo")
torch.manual_seed(0)
direction = torch.randn(8)
x, x_test = torch.randn(512, 8), torch.randn(256, 8)
y, y_test = (x @ direction > 0).long(), (x_test @ direction > 0).long()
if world > 1:
    y = y[torch.randperm(len(y))]
model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
meter = trainscale.meter()
for step in range(steps):
    time.sleep(0.02)  # its data loader: most of a step, so 2 workers train faster
    rows = slice(64 * (step % 8), 64 * (step % 8 + 1))
    with meter.step(samples=64):
        loss = F.cross_entropy(model(x[rows]), y[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
with torch.no_grad():
    meter.evaluate(accuracy=(model(x_test).argmax(1) == y_test).float().mean().item())
'''


def test_a_finalist_that_loses_accuracy_when_run_whole_is_rejected(tmp_path, capsys, monkeypatch):
    """--check-accuracy: a script that learns serially and not on 2 workers. One rung of 2
    timed steps, the baseline and 2 workers (1 thread each), then both run whole (20 steps):
    4 script runs, about 30 s on 2 busy cores."""
    real = facts.collect_environment()
    two = {**real, "usable_cores": real["usable_cores"][:2], "numa_nodes": []}
    monkeypatch.setattr(facts, "collect_environment", lambda: two)
    space = recommend_run.script_space
    monkeypatch.setattr(
        recommend_run,
        "script_space",
        lambda *args: replace(
            (s := space(*args)), candidates=[c for c in s.candidates if c.threads_per_worker == 1]
        ),
    )
    script = tmp_path / "evaluating.py"
    script.write_text(EVALUATING)
    store = tmp_path / "r.db"
    argv = ["recommend", str(script), "--rung-steps", "2", "--warmup-steps", "1"]
    argv += ["--include-busy", "--check-accuracy", "--accuracy-tolerance", "5"]
    code = main([*argv, "--store", str(store), "--json", "--", "--steps", "20"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert data["ranking"][0]["label"] == "2w x 1t compact"  # the faster, by throughput
    assert data["accuracy_checked"] and data["baseline_accuracy"] > 0.8
    (rejected,) = data["rejected"]
    assert rejected["label"] == "2w x 1t compact" and rejected["test_accuracy"] < 0.75
    assert f"the baseline's {data['baseline_accuracy']:.4f} (tolerance 5.00)" in rejected["reason"]
    assert data["best"]["label"] == "1w x 1t compact"  # the fallback: the baseline
    assert "--workers 1" in data["command"] and data["command"].endswith("-- --steps 20")
    assert "up to 2 whole script runs" in captured.err and "whole script run:" in captured.err
    with RunStore(store) as runs:
        stored = runs.list_runs(tag=data["tag"])
    assert len(stored) == len(data["trials"]) == 4
    assert all(r.status == "completed" for r in stored), [r.error for r in stored]
    whole = [r for r in stored if r.config["max_steps"] is None]
    assert sorted(r.world_size for r in whole) == [1, 2]  # the script to its own end
    assert {r.summary["num_steps"] for r in whole} == {20}
