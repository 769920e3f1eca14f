"""The per-operator overhead probe: counted as the simulator counts, stored, and read back by
`simulate --cluster local` as the device's fixed cost per operator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainscale.cli import main
from trainscale.probing.dispatch import measure_dispatch, tiny_network
from trainscale.results.store import RunStore
from trainscale.simulator.buckets import profile_model


def test_the_probe_counts_operators_as_the_simulator_counts_a_workloads() -> None:
    result = measure_dispatch(torch.device("cpu"), repeats=1, min_batch_s=0.001, budget_s=0.5)
    model, _ = tiny_network(torch.device("cpu"))
    x, y = torch.randn(8, 32), torch.randint(0, 4, (8,))
    simulator_count = profile_model(model, (x, y), torch.nn.CrossEntropyLoss()).ops_per_step
    assert result["forward_backward_ops"] == simulator_count
    # 17 linear layers: each forward is at least one kernel and each backward at least two
    assert result["forward_backward_ops"] >= 17 * 3
    # the optimizer's step dispatches more operators beside them
    assert result["step_ops"] > result["forward_backward_ops"]
    assert result["seconds_per_op"] * result["forward_backward_ops"] == pytest.approx(
        result["seconds_per_step"]
    )
    assert result["seconds_per_step_op"] < result["seconds_per_op"]


def test_the_dispatch_probe_is_stored_and_printed(capsys, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    argv = ["probe", "--device", "cpu", "--only", "dispatch", "--threads", "1", "--quick"]
    assert main([*argv, "--store", str(store)]) == 0
    printed = capsys.readouterr().out
    assert "per-operator overhead:" in printed and "us per forward + backward operator" in printed
    assert main([*argv, "--json", "--store", str(store)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["probe_ids"]) == {"dispatch"} and "matmul" not in result
    with RunStore(store) as opened:
        probe = opened.latest_probe("dispatch", host=result["host"])
        assert probe is not None and probe.probe_id == result["probe_ids"]["dispatch"]
        assert probe.result["seconds_per_op"] == pytest.approx(result["dispatch"]["seconds_per_op"])
        assert probe.result["quick"] is True and probe.result["threads"] == 1
