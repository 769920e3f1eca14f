"""`report.compare_runs.compare`: two stored runs compared as a library call."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trainscale.cli import main
from trainscale.errors import TrainscaleError
from trainscale.reporting.compare_runs import RunComparison, compare
from trainscale.results.store import RunStore


def _store(path, medians: dict[str, float], num_steps: int = 60):
    with RunStore(path) as store:
        for seed, (run_id, median) in enumerate(medians.items()):
            store.create_run(
                run_id,
                "mnist-cnn",
                {"workload": "mnist-cnn"},
                {"hostname": "h", "cpu_model": "c"},
                data_kind="synthetic",
                world_size=1,
                threads_per_worker=1,
                affinity="compact",
                precision="fp32",
                global_batch_size=64,
            )
            rng = np.random.default_rng(seed)
            steps = list(median * np.exp(rng.normal(0, 0.05, num_steps)))
            summary = {"samples_per_s": 64 / median, "warmup_steps_excluded": 0}
            store.complete_run(run_id, summary, [], steps)
    return path


def test_compare_returns_typed_sides_and_the_json_the_command_prints(tmp_path, capsys):
    store = _store(tmp_path / "s.db", {"aaaa0001": 0.06, "bbbb0001": 0.05})
    result = compare("aaaa", "bbbb", resamples=500, store=store)
    assert isinstance(result, RunComparison)
    assert (result.a.kind, result.a.ident, result.b.ident) == ("run", "aaaa0001", "bbbb0001")
    (row,) = result.rows
    assert row["throughput_ratio"] > 1.1 and row["significant"]
    assert any("one run on a side" in note for note in row["warnings"])
    argv = ["compare", "aaaa", "bbbb", "--store", str(store), "--json", "--resamples", "500"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(result.to_dict()))


def test_compare_checks_its_numbers_before_reading_the_store(tmp_path):
    missing = tmp_path / "none.db"
    with pytest.raises(TrainscaleError, match="--confidence must be between 0 and 1, got 1.5"):
        compare("a", "b", confidence=1.5, store=missing)
    with pytest.raises(TrainscaleError, match="--resamples"):
        compare("a", "b", resamples=1, store=missing)
    assert not missing.exists()


def test_a_busy_run_on_either_side_is_warned_of_and_never_significant(tmp_path, capsys):
    store = _store(tmp_path / "s.db", {"aaaa0001": 0.06, "bbbb0001": 0.05, "cccc0001": 0.04})
    with RunStore(store) as opened:
        assert opened.add_to_summary("bbbb0001", {"contention": {"verdict": "busy"}})
    quiet = compare("aaaa", "cccc", resamples=500, store=store)
    assert quiet.rows[0]["significant"] and quiet.rows[0]["trusted"]
    for a, b in (("aaaa", "bbbb"), ("bbbb", "aaaa")):
        (row,) = compare(a, b, resamples=500, store=store).rows
        # The same figures as a quiet pair would give, but no verdict rests on them.
        assert abs(row["throughput_ratio"] - 1) > 0.1
        assert row["trusted"] is False and row["significant"] is False
        side = "B" if b == "bbbb" else "A"
        assert f"{side}: 1 of 1 run(s) ran on a busy machine" in " ".join(row["warnings"])
        assert row[f"{side.lower()}_busy_runs"] == 1
    assert main(["compare", "aaaa", "bbbb", "--store", str(store), "--resamples", "500"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not trusted" in out and "warning: B: 1 of 1 run(s) ran on a busy machine" in out


def test_the_api_comparison_says_whether_it_is_trusted(tmp_path):
    import trainscale

    store = _store(tmp_path / "s.db", {"aaaa0001": 0.06, "bbbb0001": 0.05})
    assert trainscale.compare("aaaa", "bbbb", store=store, resamples=500).trusted is True
    with RunStore(store) as opened:
        opened.add_to_summary("aaaa0001", {"contention": {"verdict": "busy"}})
    found = trainscale.compare("aaaa", "bbbb", store=store, resamples=500)
    assert found.trusted is False and found.significant is False


def test_the_table_says_when_a_side_timed_too_few_steps_to_judge(tmp_path, capsys):
    store = _store(tmp_path / "s.db", {"aaaa0001": 0.10, "bbbb0001": 0.135}, num_steps=1)
    assert main(["compare", "aaaa", "bbbb", "--store", str(store), "--resamples", "500"]) == 0
    out = capsys.readouterr().out
    assert "fewer than 2 timed steps a side" in out and " yes " not in out
