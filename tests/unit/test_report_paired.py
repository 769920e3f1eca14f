"""Report and sweep summary: speedups paired with the baseline repeat by repeat (rounds)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from trainscale.reporting.build import build_report, load_report_data
from trainscale.reporting.model import ReportData
from trainscale.results.store import RunStore
from trainscale.runner.launch import RunFailed
from trainscale.runner.record import create_run_row
from trainscale.sweeps.run import load_sweep, run_sweep

from tests.helpers.report_store import build_store, cpu_parallel_configs

SWEEP = "5eed0000"


@pytest.fixture
def cpu_report(tmp_path: Path) -> ReportData:
    store = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    return load_report_data(store, sweep_id=SWEEP)


def _config(data: ReportData, label: str):
    return next(c for c in data.configurations if c.label == label)


def test_each_configuration_is_paired_with_the_baseline_repeat_by_repeat(cpu_report):
    # Serial did 100, 102, 98 samples/s in repeats 0-2; pinned 300 and 310 (repeat 2 failed).
    pinned = _config(cpu_report, "cnn 4 pinned workers x 1 thread")
    assert pinned.paired_rounds == 2
    assert pinned.paired_speedup == pytest.approx((3.0 + 310 / 102) / 2)
    assert pinned.paired_speedup_ci == pytest.approx((3.0, 310 / 102))
    assert pinned.paired_verdict == "faster than the baseline"
    assert (
        "paired with the baseline (2 rounds: with fewer than 5 rounds the interval is wide): "
        "faster than the baseline" in pinned.notes
    )
    threads = _config(cpu_report, "cnn 1 process x 4 threads")
    assert threads.paired_rounds == 3
    # 250/100 = 2.5, 260/102 = 2.55, 255/98 = 2.60: the middle one.
    assert threads.paired_speedup == pytest.approx(260 / 102)


def test_a_noisy_configuration_has_no_measurable_difference(cpu_report):
    # Naive: 60, 90, 120 against 100, 102, 98: ratios 0.6, 0.88, 1.22.
    naive = _config(cpu_report, "cnn naive DDP: 4 unpinned workers, torch-default threads")
    assert naive.paired_speedup == pytest.approx(90 / 102)
    low, high = naive.paired_speedup_ci
    assert low < 1.0 < high
    assert naive.paired_verdict == "no difference measurable here"


def test_the_baseline_and_loose_runs_are_not_paired(cpu_report, tmp_path):
    serial = _config(cpu_report, "cnn serial 1 core")
    assert serial.is_baseline and serial.paired_speedup is None and serial.paired_rounds == 0
    # Runs stored outside any sweep or bench have no round: nothing to pair.
    store = build_store(tmp_path / "loose.db", cpu_parallel_configs(), sweep_id=None)
    with RunStore(store) as opened:
        ids = [r.run_id for r in opened.list_runs()]
    loose = load_report_data(store, run_ids=ids)
    assert all(c.paired_speedup is None for c in loose.configurations)
    assert not any("paired" in note for c in loose.configurations for note in c.notes)


def test_report_files_show_the_paired_speedup_with_its_interval(tmp_path):
    store = build_store(tmp_path / "runs.db", cpu_parallel_configs())
    written = build_report(store, sweep_id=SWEEP, out_dir=tmp_path / "out")
    cell = f"3.02x [3.00, {310 / 102:.2f}]"
    # Markdown escapes the brackets, so that they never read as a link.
    markdown = written.markdown.read_text(encoding="utf-8")
    assert cell.replace("[", "\\[").replace("]", "\\]") in markdown
    assert cell in written.html.read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(written.csv.read_text(encoding="utf-8"))))
    pinned = next(r for r in rows if r["configuration"] == "cnn 4 pinned workers x 1 thread")
    assert float(pinned["paired_speedup_low"]) == pytest.approx(3.0)
    assert pinned["paired_rounds"] == "2"
    assert pinned["paired_verdict"] == "faster than the baseline"


SPEC = """
name = "paired"
repeats = 2
[base]
workload = "mnist-cnn"
data = "synthetic"
steps = 3
threads_per_worker = 1
[grid]
batch_size = [8, 16]
"""

# The machine halves its speed between the two repeats; batch 16 stays 1.3x ahead in both.
RATES = {(8, 0): 100.0, (16, 0): 130.0, (8, 1): 50.0, (16, 1): 65.0}


class DriftingRunner:
    """Stands in for execute_run: stores each run with the throughput of RATES."""

    def __init__(self) -> None:
        self.order: list[tuple[int, int]] = []

    def __call__(self, options, store_path, quiet, slot, config):
        key = (config.optimisation.global_batch_size, slot.repeat)
        self.order.append(key)
        run_id = f"run-{slot.item}"
        with RunStore(store_path) as store:
            create_run_row(store, run_id, config, slot)
            if key not in RATES:
                store.fail_run(run_id, "injected")
                raise RunFailed(run_id, "injected")
            store.complete_run(run_id, {"samples_per_s": RATES[key]}, [], [0.1, 0.1])
        return {"run_id": run_id, "samples_per_s": RATES[key]}


def test_a_sweep_with_repeats_pairs_each_repeat_in_its_summary_and_report(tmp_path, monkeypatch):
    runner = DriftingRunner()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runner)
    path = tmp_path / "paired.toml"
    path.write_text(SPEC)
    spec, source = load_sweep(path)
    result = run_sweep(spec, source, store=tmp_path / "s.db")
    # Interleaved: every configuration once per repeat, repeat by repeat.
    assert runner.order == [(8, 0), (16, 0), (8, 1), (16, 1)]
    rows = {row[0]: row for row in result.summary.rows}
    assert rows["batch_size=8"][5:7] == ["1.00x", "baseline"]
    assert rows["batch_size=16"][5:7] == [
        "1.30x [1.30, 1.30] (2 rounds)",
        "faster than the baseline",
    ]
    data = load_report_data(tmp_path / "s.db", sweep_id=result.outcome.sweep_id)
    b16 = _config(data, "batch_size=16")
    assert b16.paired_speedup == pytest.approx(1.3) and b16.paired_rounds == 2
    assert b16.paired_verdict == "faster than the baseline"
