"""The table of time and accuracy per platform (CPU serial, CPU parallel, GPU) and the final
accuracy plot, from Configuration objects built here (no store, no training)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from trainscale.reporting.aggregate import _epochs_trained
from trainscale.reporting.baseline import with_speedup
from trainscale.reporting.html import render_html
from trainscale.reporting.markdown import render_markdown
from trainscale.reporting.model import Configuration, ReportData, WorkloadSection
from trainscale.reporting.platforms import (
    PLATFORM_COLUMNS,
    platform_note,
    platform_rows,
    platform_table_applies,
)
from trainscale.reporting.plots import PLOT_TITLES, draw_figure, png_bytes
from trainscale.results.stored_figures import StoredFigures
from trainscale.results.stored_settings import StoredSettings

from tests.helpers.report_store import FixtureConfig, build_store

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _configuration(label: str, **changes: Any) -> Configuration:
    """A real-data configuration trained for 2 epochs in 120 s, evaluated 3 times."""
    config: dict[str, Any] = {"epochs": 2.0, "steps": None, "nnodes": 1}
    config.update(changes.pop("config", {}))
    base = Configuration(
        key=label,
        label=label,
        workload="mnist-cnn",
        data_kind="real",
        workers=1,
        threads_per_worker=1,
        threads_setting="1",
        affinity="compact",
        pinned=True,
        total_threads=1,
        cores=1,
        oversubscribed=False,
        precision="fp32",
        global_batch_size=64,
        config=config,
        run_ids=["r1", "r2", "r3"],
        num_failed=0,
        samples_per_s=[100.0, 100.0, 100.0],
        samples_per_s_median=100.0,
        samples_per_s_iqr=0.0,
        step_time_s_median=0.64,
        step_time_rel_iqr=0.02,
        train_time_s=120.0,
        test_accuracy=0.9812,
        target_accuracy=0.97,
        time_to_target_s=80.0,
        num_reached=3,
        num_evaluated=3,
        peak_memory_bytes=None,
        accuracy_curves=[[(40.0, 0.95), (80.0, 0.975), (120.0, 0.9812)]],
        breakdown_s=None,
    )
    return replace(base, **changes)


def _section() -> WorkloadSection:
    serial = _configuration("cpu serial", is_baseline=True, speedup=1.0)
    parallel = _configuration(
        "cpu parallel",
        workers=4,
        threads_per_worker=2,
        threads_setting="2",
        cores=8,
        total_threads=8,
        train_time_s=40.0,
        test_accuracy=0.9790,
        time_to_target_s=30.0,
        num_reached=2,
        speedup=3.1,
        paired_speedup=3.05,
        paired_speedup_ci=(2.9, 3.2),
        paired_rounds=3,
    )
    gpu = _configuration(
        "one gpu",
        device_type="cuda",
        devices=1,
        device_name="NVIDIA H100 80GB HBM3",
        train_time_s=6.0,
        time_to_target_s=4.0,
        speedup=21.0,
        paired_speedup=20.5,
        paired_rounds=1,
        # Trained a number of steps: its epochs are not in the stored config.
        config={"steps": 500},
    )
    return _section_of([serial, parallel, gpu], baseline=serial)


def _section_of(
    configs: list[Configuration], baseline: Configuration | None = None
) -> WorkloadSection:
    return WorkloadSection(
        workload="mnist-cnn",
        configurations=configs,
        baseline=baseline,
        baseline_rule="default: the 1-worker configuration with the fewest cores",
        series=[],
        amdahl=None,
        amdahl_note="no fit",
        affinity_rows=[],
    )


def _report(section: WorkloadSection) -> ReportData:
    return ReportData(
        title="platforms",
        source="runs r1",
        sweep_id=None,
        workloads=[section],
        not_completed=[],
        machines=[],
        notes=[],
    )


def test_rows_name_the_platform_time_per_epoch_and_speedup() -> None:
    serial, parallel, gpu = platform_rows(_section())
    assert serial == {
        "configuration": "cpu serial (baseline)",
        "platform": "CPU serial, 1 worker x 1 thread",
        "time per epoch (s)": "60.0",
        "time to target (s)": "80.0",
        "test accuracy": "0.9812",
        "throughput speedup [95%]": "1.00x",
        "speedup to target [95%]": "1.00x",
    }
    assert parallel["platform"] == "CPU parallel, 4 workers x 2 threads"
    assert parallel["time per epoch (s)"] == "20.0"
    assert parallel["time to target (s)"] == "30.0 (2/3)"
    assert parallel["throughput speedup [95%]"] == "3.05x [2.90, 3.20]"
    assert gpu["platform"] == "1 GPU (NVIDIA H100 80GB HBM3)"
    assert gpu["time per epoch (s)"] == "-"  # trained by steps
    assert gpu["throughput speedup [95%]"] == "20.50x (one round)"
    # No rounds stored here: the ratio of the median times to target, 80 s over 30 s and 4 s.
    assert parallel["speedup to target [95%]"] == "2.67x (unpaired)"
    assert gpu["speedup to target [95%]"] == "20.00x (unpaired)"
    assert list(serial) == list(PLATFORM_COLUMNS)


def test_unpaired_speedup_several_gpus_and_torch_default_threads() -> None:
    serial, _, gpu = _section().configurations
    two_gpus = replace(
        gpu, workers=2, devices=2, device_name=None, paired_speedup=None, speedup=38.0
    )
    threads = replace(
        serial, is_baseline=False, threads_per_worker=4, threads_setting="torch-default"
    )
    busy = replace(two_gpus, label="busy", busy_runs=1)
    rows = platform_rows(_section_of([serial, two_gpus, threads, busy], baseline=serial))
    assert rows[1]["platform"] == "2 GPUs"
    assert rows[1]["throughput speedup [95%]"] == "38.00x (unpaired)"
    assert rows[2]["platform"] == "CPU parallel, 1 worker x 4 threads (torch default)"
    assert rows[3]["throughput speedup [95%]"] == "38.00x (unpaired) (not trusted: busy machine)"


def test_table_applies_only_with_two_evaluated_configurations() -> None:
    section = _section()
    assert platform_table_applies(section)
    synthetic = [
        replace(c, data_kind="synthetic", test_accuracy=None, num_evaluated=0, num_reached=0)
        for c in section.configurations
    ]
    assert not platform_table_applies(_section_of(synthetic))
    # One evaluated configuration has nothing to compare its accuracy with.
    assert not platform_table_applies(_section_of([section.configurations[0], *synthetic[1:]]))


def test_markdown_and_html_show_the_table_when_it_applies() -> None:
    report = _report(_section())
    markdown = render_markdown(report, [], [], "2026-01-01 00:00")
    assert "### Time and accuracy per platform" in markdown
    assert "| cpu parallel | CPU parallel, 4 workers x 2 threads | 20.0 |" in markdown
    assert "Throughput speedup is samples/s over that of the baseline 'cpu serial'" in markdown
    page = render_html(report, [], [], "2026-01-01 00:00")
    assert "<h3>Time and accuracy per platform</h3>" in page
    assert "1 GPU (NVIDIA H100 80GB HBM3)" in page and "3.05x [2.90, 3.20]" in page
    synthetic = [
        replace(c, data_kind="synthetic", test_accuracy=None, num_evaluated=0)
        for c in _section().configurations
    ]
    quiet = _report(_section_of(synthetic))
    assert "per platform" not in render_markdown(quiet, [], [], "2026-01-01 00:00")
    assert "per platform" not in render_html(quiet, [], [], "2026-01-01 00:00")


def test_final_accuracy_plot_is_drawn_or_skipped_with_its_reason() -> None:
    assert PLOT_TITLES["final-accuracy"] == "Final test accuracy"
    outcome = draw_figure("final-accuracy", _section())
    assert not isinstance(outcome, str)
    figure, alt = outcome
    assert png_bytes(figure).startswith(PNG_SIGNATURE)
    assert "final test accuracy" in alt
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert texts == ["98.12% (3 runs)", "97.90% (3 runs)", "98.12% (3 runs)"]
    synthetic = [
        replace(c, data_kind="synthetic", test_accuracy=None, num_evaluated=0)
        for c in _section().configurations
    ]
    reason = draw_figure("final-accuracy", _section_of(synthetic))
    assert reason == "synthetic data only: no accuracy claim is made"


def test_without_a_baseline_the_note_says_why_there_is_no_speedup() -> None:
    configs = [
        replace(c, is_baseline=False, speedup=None, paired_speedup=None, paired_speedup_ci=None)
        for c in _section().configurations
    ]
    section = replace(_section_of(configs), baseline_rule="no configuration recorded a throughput")
    assert {row["throughput speedup [95%]"] for row in platform_rows(section)} == {"-"}
    assert platform_note(section).startswith("No speedup: no configuration recorded")


def test_time_per_epoch_counts_the_epochs_runs_trained_before_their_target() -> None:
    # Planned 2 epochs in the config; the runs stopped at their target after 1.5 of them.
    stopped = _configuration("stopped", epochs_trained=1.5)
    (row,) = platform_rows(_section_of([stopped], baseline=stopped))
    assert row["time per epoch (s)"] == "80.0"  # 120 s over 1.5 epochs, not over 2


def test_the_epochs_trained_are_the_runs_share_of_their_planned_steps() -> None:
    def run(**summary: Any) -> Any:
        return SimpleNamespace(figures=StoredFigures.of(summary))

    settings = StoredSettings.of({"epochs": 4.0, "steps": None})
    stopped = [run(num_steps=97, planned_steps=388), run(num_steps=194, planned_steps=388)]
    assert _epochs_trained(stopped, settings) == 1.5  # the median of 1 and 2
    assert _epochs_trained([run(num_steps=388)], settings) == 4.0  # stored before: whole length
    in_steps = StoredSettings.of({"epochs": 4.0, "steps": 388})
    assert _epochs_trained(stopped, in_steps) is None


def test_speedup_to_target_pairs_rounds_and_differs_from_throughputs() -> None:
    # Two rounds: the baseline reaches its target in 70 s and 72 s; the parallel setting has
    # a lower throughput speedup (1.3x) but needs fewer samples, so it gets there 1.5x and
    # 1.6x sooner. The figure is the median of the per-round ratios, with their interval.
    rounds = {'["s", null, 0]': 70.0, '["s", null, 1]': 72.0}
    serial = _configuration(
        "cpu serial", is_baseline=True, time_to_target_s=71.0, time_to_target_s_by_round=rounds
    )
    parallel = _configuration(
        "2 pinned",
        workers=2,
        time_to_target_s=45.0,
        time_to_target_s_by_round={'["s", null, 0]': 70.0 / 1.5, '["s", null, 1]': 72.0 / 1.6},
        paired_speedup=1.3,
        paired_speedup_ci=(1.28, 1.32),
    )
    row = platform_rows(_section_of([serial, parallel], baseline=serial))[1]
    assert row["throughput speedup [95%]"] == "1.30x [1.28, 1.32]"
    assert row["speedup to target [95%]"] == "1.55x [1.50, 1.60]"
    # A busy round is left out while a quiet one remains: one round, no interval.
    busy = replace(parallel, busy_rounds=frozenset({'["s", null, 1]'}), busy_runs=1)
    row = platform_rows(_section_of([serial, busy], baseline=serial))[1]
    assert row["speedup to target [95%]"] == "1.50x (one round)"
    # Every shared round busy: the figure stands, marked.
    all_busy = replace(busy, busy_rounds=frozenset(rounds))
    row = platform_rows(_section_of([serial, all_busy], baseline=serial))[1]
    assert row["speedup to target [95%]"].endswith("(not trusted: busy machine)")
    # Never reached the target: no speedup to it, whatever the throughput.
    missed = replace(parallel, time_to_target_s=None, time_to_target_s_by_round={}, num_reached=0)
    row = platform_rows(_section_of([serial, missed], baseline=serial))[1]
    assert row["speedup to target [95%]"] == "-"


def test_a_report_says_so_instead_of_calling_the_spread_noise() -> None:
    # Texts of unequal length (tests/unit/test_unequal_steps.py): the steps' spread is the
    # batches', said in a note, not flagged as noise.
    spread = replace(_configuration("texts"), step_time_rel_iqr=1.26)
    noted = with_speedup(replace(spread, unequal_steps=True), None)
    assert not noted.noisy
    assert "throughput over the mean step: texts of unequal length, step-time IQR 126%" in (
        "; ".join(noted.notes)
    )
    # The same spread from equal steps is noise.
    plain = with_speedup(spread, None)
    assert plain.noisy and any("noisy: step-time IQR" in note for note in plain.notes)


def test_emulations_beside_runs_leave_the_platform_rows_and_their_marks_in_place(tmp_path):
    from trainscale.reporting.build import write_report

    def config(label, workers, extra=None):
        return FixtureConfig(
            label, "mnist-cnn", workers, 1, "compact", [100.0 * workers, 100.0 * workers],
            accuracies=[0.98, 0.98], times_to_target=[5.0, 5.0], extra_config=extra or {},
        )  # fmt: skip

    emulation = {"emulation": {"mode": "sync", "workers": 2}}
    configs = [config("emulated", 1, emulation), config("serial", 1), config("two", 2)]
    store = build_store(tmp_path / "s.db", configs)
    write_report(store, sweep_id="5eed0000", out_dir=tmp_path / "out", baseline="serial")
    html = (tmp_path / "out" / "report.html").read_text()
    platforms = html.split("Time and accuracy per platform", 1)[1].split("</table>", 1)[0]
    rows = platforms.split("<tr")[2:]  # after the header row
    assert len(rows) == 2  # the emulation is no platform
    assert 'class="baseline"' in rows[0] and "serial" in rows[0]
    assert 'class="baseline"' not in rows[1]
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "no price for" not in markdown  # an emulation has no cost to price
