"""`trainscale bench --quick --json` on a GPU machine: the GPU rungs run in the rounds, are
stored, and the verdict line against the fastest CPU setting is written and in the JSON (the
printing of verdicts is tested on a CPU with a faked GPU). Skipped without CUDA."""

from __future__ import annotations

import json

import pytest
import torch

from trainscale.cli import main

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_quick_bench_runs_the_gpu_rung_and_says_how_it_compares(tmp_path, capsys, one_host_core):
    # No extra rounds: the GPU check runs tests side by side, which a contention sampler
    # sees as a busy machine (the line is then marked, still printed).
    out = tmp_path / "bench.md"
    args = ["bench", "--quick", "--max-extra-rounds", "0", "--data", "synthetic"]
    args += ["--store", str(tmp_path / "s.db")]
    code = main([*args, "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = out.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 1 GPU |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] != "-", f"the 1 GPU rung did not run: {row}"  # samples/s
    assert "same recipe" in row
    # The verdict line: paired against the fastest CPU setting, in the table and the JSON.
    verdict = next(line for line in text.splitlines() if line.startswith("- 1 GPU: "))
    assert "the fastest CPU setting here" in verdict
    document = json.loads(captured.out)
    assert f"- {document['gpu_verdicts'][0]}" == verdict
    # The GPU runs are stored as such, and the configurations read them back.
    gpu_runs = [r for r in document["runs"] if r["config"]["device"] == "cuda"]
    assert gpu_runs and all(r["status"] == "completed" for r in gpu_runs)
    assert any(c["setting"] == "1 GPU" for c in document["configurations"])
