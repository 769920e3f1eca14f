"""Report figures, plots and pages from small fixture stores (no training)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from trainscale.reporting import ReportError
from trainscale.reporting.build import build_report, load_report_data, write_report
from trainscale.reporting.csv_table import CSV_COLUMNS
from trainscale.reporting.labels import labels_from_differences
from trainscale.reporting.model import ReportData
from trainscale.reporting.plots import render_plots
from trainscale.results.store import RunStore

from tests.helpers.report_store import (
    FixtureConfig,
    build_store,
    cpu_parallel_configs,
    run_id,
    scaling_configs,
)

SWEEP = "5eed0000"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def cpu_store(tmp_path: Path) -> Path:
    return build_store(tmp_path / "runs.db", cpu_parallel_configs())


@pytest.fixture
def cpu_report(cpu_store: Path) -> ReportData:
    return load_report_data(cpu_store, sweep_id=SWEEP)


def _config(data: ReportData, label: str):
    return next(c for c in data.configurations if c.label == label)


# -- aggregation --------------------------------------------------------------------------


def test_configurations_keep_plan_order_and_labels(cpu_report: ReportData) -> None:
    assert [s.workload for s in cpu_report.workloads] == ["mnist-cnn", "tweets-text"]
    assert [c.label for c in cpu_report.configurations] == [c.label for c in cpu_parallel_configs()]


def test_medians_spread_and_repeats(cpu_report: ReportData) -> None:
    serial = _config(cpu_report, "cnn serial 1 core")
    assert serial.repeats == 3
    assert serial.samples_per_s_median == pytest.approx(100.0)
    assert serial.samples_per_s_iqr == pytest.approx(2.0)  # quartiles 99 and 101
    assert serial.step_time_s_median == pytest.approx(64 / 100)
    assert serial.step_time_rel_iqr == pytest.approx(0.02)
    assert serial.peak_memory_bytes == pytest.approx(300 * 2**20)
    pinned = _config(cpu_report, "cnn 4 pinned workers x 1 thread")
    assert pinned.repeats == 2 and pinned.num_failed == 1
    assert pinned.samples_per_s_median == pytest.approx(305.0)
    # The largest worker's peak, not the first one's.
    assert pinned.peak_memory_bytes == pytest.approx(303 * 2**20)


def test_default_baseline_is_single_worker_with_fewest_cores(cpu_report: ReportData) -> None:
    mnist, text = cpu_report.workloads
    assert mnist.baseline is not None and mnist.baseline.label == "cnn serial 1 core"
    assert "fewest cores" in mnist.baseline_rule
    # Per workload: the text network has its own baseline.
    assert text.baseline is not None and text.baseline.label == "text affinity set 1 core(s)"
    assert [c.is_baseline for c in mnist.configurations] == [True, False, False, False]


def test_speedup_and_efficiency(cpu_report: ReportData) -> None:
    threads = _config(cpu_report, "cnn 1 process x 4 threads")
    assert threads.speedup == pytest.approx(2.55)
    assert threads.efficiency_per_worker == pytest.approx(2.55)  # still one worker
    assert threads.cores == 4
    assert threads.efficiency_per_core == pytest.approx(2.55 / 4)
    pinned = _config(cpu_report, "cnn 4 pinned workers x 1 thread")
    assert pinned.speedup == pytest.approx(3.05)
    assert pinned.efficiency_per_worker == pytest.approx(3.05 / 4)
    assert pinned.efficiency_per_core == pytest.approx(3.05 / 4)
    text = _config(cpu_report, "text affinity set 2 core(s)")
    assert text.speedup == pytest.approx(710 / 405)


def test_oversubscribed_naive_setting_is_flagged_noisy(cpu_report: ReportData) -> None:
    naive = _config(cpu_report, "cnn naive DDP: 4 unpinned workers, torch-default threads")
    assert naive.oversubscribed and not naive.pinned
    assert naive.total_threads == 16 and naive.cores == 4
    assert naive.threads_setting == "torch-default"
    assert naive.noisy
    notes = " ".join(naive.notes)
    assert "throughput IQR across 3 repeats is 33.3%" in notes
    assert "step-time IQR within runs is 30.0%" in notes
    assert "oversubscribed: 16 threads on 4 cores" in notes
    assert not _config(cpu_report, "cnn serial 1 core").noisy


def test_time_to_target_and_accuracy(cpu_report: ReportData) -> None:
    serial = _config(cpu_report, "cnn serial 1 core")
    assert serial.time_to_target_s == pytest.approx(31.0)  # median of the 2 that reached it
    assert (serial.num_reached, serial.num_evaluated) == (2, 3)
    assert serial.test_accuracy == pytest.approx(0.975)
    assert "target reached in 2 of 3 runs" in serial.notes
    naive = _config(cpu_report, "cnn naive DDP: 4 unpinned workers, torch-default threads")
    assert naive.time_to_target_s is None and naive.num_reached == 0
    assert len(serial.accuracy_curves) == 3


def test_no_accuracy_from_synthetic_data(cpu_report: ReportData, tmp_path: Path) -> None:
    # The fixture's synthetic summaries carry test_accuracy 0.5 and a time to target.
    for label in ("text affinity set 1 core(s)", "text affinity set 2 core(s)"):
        config = _config(cpu_report, label)
        assert config.synthetic
        assert config.test_accuracy is None
        assert config.time_to_target_s is None
        assert config.accuracy_curves == []
    plots, skipped = render_plots(cpu_report)
    assert not [p for p in plots if p.workload == "tweets-text" and p.kind == "accuracy"]
    reasons = {s.kind: s.reason for s in skipped if s.workload == "tweets-text"}
    assert "synthetic" in reasons["accuracy"]


def test_failed_runs_are_listed_with_their_reason(cpu_report: ReportData) -> None:
    (failed,) = cpu_report.not_completed
    assert failed.run_id == run_id(2, 2)
    assert failed.label == "cnn 4 pinned workers x 1 thread"
    assert failed.status == "failed"
    assert "worker 1 exited" in failed.reason


def test_retried_and_running_runs_are_listed(cpu_store: Path) -> None:
    from trainscale.results.store import RunStore

    serial = cpu_parallel_configs()[0]
    with RunStore(cpu_store) as store:
        for rid, repeat in (("c0r0a1" + "f" * 26, 0), ("c0r9a0" + "f" * 26, 9)):
            store.create_run(
                rid,
                serial.workload,
                serial.config(),
                {},
                data_kind="real",
                world_size=1,
                threads_per_worker=1,
                affinity="compact",
                precision="fp32",
                global_batch_size=64,
                config_hash=serial.key(),
                sweep_id="5eed0000aaaabbbbccccddddeeeeffff",
                sweep_item=0,
                repeat_index=repeat,
            )
        store.fail_run("c0r0a1" + "f" * 26, "interrupted: the sweep process stopped")
    data = load_report_data(cpu_store, sweep_id=SWEEP)
    by_id = {run.run_id[:6]: run for run in data.not_completed}
    assert by_id["c0r0a1"].retried  # repeat 0 of this configuration did complete
    assert by_id["c0r9a0"].status == "running" and not by_id["c0r9a0"].retried
    assert "still running" in by_id["c0r9a0"].reason
    # Neither changes the configuration's figures.
    assert _config(data, "cnn serial 1 core").repeats == 3


def test_baseline_without_a_single_worker_configuration(tmp_path: Path) -> None:
    store = build_store(tmp_path / "two-up.db", scaling_configs(0.1)[1:])  # 2 and 4 workers
    (section,) = load_report_data(store, sweep_id=SWEEP).workloads
    assert section.baseline is not None and section.baseline.label == "workers=2"
    assert "no 1-worker configuration" in section.baseline_rule
    four = section.configuration(section.series[0].keys[-1])
    assert four.efficiency_per_worker == pytest.approx(four.speedup / 2)  # 4 vs 2 workers
    # Amdahl over n = 4/2 = 2 relative to the baseline: one point, fitted exactly.
    assert section.amdahl is not None and section.amdahl.num_points == 1


def test_amdahl_fit_on_the_baseline_series(tmp_path: Path) -> None:
    store = build_store(tmp_path / "scaling.db", scaling_configs(0.1))
    data = load_report_data(store, sweep_id=SWEEP)
    (section,) = data.workloads
    assert section.amdahl is not None
    assert section.amdahl.serial_fraction == pytest.approx(0.1)
    assert "s = 0.100" in section.amdahl_note
    # The note counts what the fit counts: the worker counts beyond the baseline's.
    assert section.amdahl.num_points == 2
    assert "fitted to 2 configuration(s) with n = 2, 4 workers;" in section.amdahl_note
    # Weak scaling: the global batch grows with the workers, and the report says so.
    four = _config(data, "workers=4")
    assert any("weak scaling" in note for note in four.notes)


def test_amdahl_fit_in_cpu_parallel_uses_pinned_series(cpu_report: ReportData) -> None:
    mnist = cpu_report.workloads[0]
    # Series with 1 thread per worker, pinned: serial (n=1) and 4 workers (speedup 3.05).
    assert mnist.amdahl is not None
    assert mnist.amdahl.serial_fraction == pytest.approx((1 / 3.05 - 0.25) / 0.75)
    assert cpu_report.workloads[1].amdahl is None  # one worker count only
    assert "no Amdahl fit" in cpu_report.workloads[1].amdahl_note


def test_affinity_table_shows_pitfall_beside_pinned(cpu_report: ReportData) -> None:
    mnist = cpu_report.workloads[0]
    rows = {row.label: row for row in mnist.affinity_rows}
    naive = rows["cnn naive DDP: 4 unpinned workers, torch-default threads"]
    assert naive.gain_vs_slowest_pct == pytest.approx(0.0)  # the slowest
    assert naive.oversubscribed and "oversubscribed" in naive.setting
    # gain = 1 - t / t_slowest = 1 - 90 / rate (same global batch)
    assert rows["cnn serial 1 core"].gain_vs_slowest_pct == pytest.approx(10.0)
    # Step time is the median of the runs' medians: 64/300 s and 64/310 s.
    pinned_step_s = (64 / 300 + 64 / 310) / 2
    assert rows["cnn 4 pinned workers x 1 thread"].step_time_ms == pytest.approx(
        1000 * pinned_step_s
    )
    assert rows["cnn 4 pinned workers x 1 thread"].gain_vs_slowest_pct == pytest.approx(
        100 * (1 - pinned_step_s / (64 / 90))
    )
    assert "pinned (compact)" in rows["cnn 4 pinned workers x 1 thread"].setting
    text_rows = cpu_report.workloads[1].affinity_rows
    assert [r.label for r in text_rows] == [
        "text affinity set 1 core(s)",
        "text affinity set 2 core(s)",
    ]


def test_baseline_override_by_label_and_by_run_id(cpu_store: Path) -> None:
    by_label = load_report_data(cpu_store, sweep_id=SWEEP, baseline="cnn 1 process x 4 threads")
    mnist = by_label.workloads[0]
    assert mnist.baseline is not None and mnist.baseline.label == "cnn 1 process x 4 threads"
    assert "--baseline" in mnist.baseline_rule
    assert _config(by_label, "cnn serial 1 core").speedup == pytest.approx(100 / 255)
    # Efficiency is relative to the baseline's cores: 4 pinned workers vs 1 process on 4 cores.
    pinned = _config(by_label, "cnn 4 pinned workers x 1 thread")
    assert pinned.efficiency_per_core == pytest.approx(305 / 255)
    # The other workload keeps its default.
    assert by_label.workloads[1].baseline.label == "text affinity set 1 core(s)"

    by_run = load_report_data(cpu_store, sweep_id=SWEEP, baseline=run_id(2, 1)[:6])
    assert by_run.workloads[0].baseline.label == "cnn 4 pinned workers x 1 thread"


@pytest.mark.parametrize(
    ("baseline", "message"),
    [
        ("no such config", "neither a configuration label nor a run id"),
        ("c", "matches"),  # every fixture run id starts with 'c'
        (run_id(2, 2), "is failed"),
    ],
)
def test_bad_baseline(cpu_store: Path, baseline: str, message: str) -> None:
    with pytest.raises(ReportError, match=message):
        load_report_data(cpu_store, sweep_id=SWEEP, baseline=baseline)


def test_runs_labelled_by_the_keys_that_differ(tmp_path: Path) -> None:
    store = build_store(tmp_path / "loose.db", cpu_parallel_configs()[:4], sweep_id=None)
    ids = [run_id(i, 0) for i in range(4)] + [run_id(0, 1)]
    data = load_report_data(store, run_ids=ids)
    labels = [c.label for c in data.configurations]
    assert labels == [
        "workers=1, threads_per_worker=1, affinity=compact",
        "workers=1, threads_per_worker=4, affinity=compact",
        "workers=4, threads_per_worker=1, affinity=compact",
        "workers=4, threads_per_worker=torch-default, affinity=none",
    ]
    # Two runs of the first configuration were named: they are its repeats.
    assert data.configurations[0].repeats == 2
    assert data.source.startswith("runs c0r0a0")


def test_labels_from_differences_disambiguates() -> None:
    configs = {"aaaaaaaa1": {"workers": 2, "lr": 0.1}, "bbbbbbbb2": {"workers": 2, "lr": 0.1}}
    labels = labels_from_differences(configs)
    assert labels == {
        "aaaaaaaa1": "workers=2, threads_per_worker=? [aaaaaaaa]",
        "bbbbbbbb2": "workers=2, threads_per_worker=? [bbbbbbbb]",
    }


def test_a_setting_a_run_was_stored_without_is_its_default_in_labels() -> None:
    """A run stored before `framework` existed trained with PyTorch: beside a PyTorch run it
    differs only by what really differs, and beside a JAX run it is named pytorch."""
    old = {"workload": "mnist-cnn", "workers": 1}
    newer = {"workload": "mnist-cnn", "workers": 2, "framework": "pytorch"}
    assert labels_from_differences({"old": old, "new": newer}) == {
        "old": "workers=1",
        "new": "workers=2",
    }
    jax = {**newer, "workers": 1, "framework": "jax"}
    assert labels_from_differences({"old": old, "jax": jax}) == {
        "old": "framework=pytorch",
        "jax": "framework=jax",
    }


def test_emulations_are_named_in_their_own_words() -> None:
    # "sync x4", as docs/emulation.md names them and `--baseline` takes them.
    sync = {"workload": "mnist-cnn", "emulation": {"mode": "sync", "workers": 4}}
    local = {**sync, "emulation": {"mode": "local-sgd", "workers": 4, "local_steps": 8}}
    plain = {"workload": "mnist-cnn", "emulation": None}
    assert labels_from_differences({"a": sync, "b": local, "c": plain}) == {
        "a": "sync x4",
        "b": "local-sgd x4 H=8",
        "c": "emulation=none",
    }


def test_a_scripts_arguments_read_as_typed_and_an_unset_value_as_its_default() -> None:
    first = {"workload": "script:train.py", "script_args": ["--epochs", "3"]}
    second = {**first, "script_args": ["--lr", "0.1 0.2"], "target_accuracy": 0.8}
    third = {**first, "script_args": [], "target_accuracy": None}
    assert labels_from_differences({"1": first, "2": second, "3": third}) == {
        "1": "script_args=--epochs 3, target_accuracy=default",
        "2": "script_args=--lr '0.1 0.2', target_accuracy=0.8",
        "3": "script_args=(none), target_accuracy=default",
    }


PHASES = ("data", "forward", "backward", "optimizer", "exposed_comm")


def test_the_breakdown_holds_the_phases_the_trainer_times_and_nothing_else(
    cpu_report: ReportData,
) -> None:
    pinned = _config(cpu_report, "cnn 4 pinned workers x 1 thread")
    # The fixture's summaries are the trainer's, so a count stored among the seconds would
    # show here (and as a bar of its own in the plot).
    assert tuple(pinned.breakdown_s) == PHASES
    assert pinned.breakdown_s["backward"] == pytest.approx(0.09)
    assert _config(cpu_report, "cnn serial 1 core").breakdown_s is None


def test_a_breakdown_stored_with_its_step_count_among_the_seconds_reads_without_it(
    cpu_store: Path,
) -> None:
    import json
    import sqlite3

    # Runs stored before `breakdown_sampled_steps` kept the count in `breakdown_s`.
    with sqlite3.connect(cpu_store) as conn:
        for rid in (run_id(2, 0), run_id(2, 1)):
            (text,) = conn.execute(
                "SELECT summary_json FROM runs WHERE run_id = ?", (rid,)
            ).fetchone()
            old = json.loads(text)
            old["breakdown_s"]["num_sampled_steps"] = 38
            del old["breakdown_sampled_steps"]
            conn.execute(
                "UPDATE runs SET summary_json = ? WHERE run_id = ?", (json.dumps(old), rid)
            )
    data = load_report_data(cpu_store, sweep_id=SWEEP)
    pinned = _config(data, "cnn 4 pinned workers x 1 thread")
    assert tuple(pinned.breakdown_s) == PHASES
    assert pinned.breakdown_s["backward"] == pytest.approx(0.09)


def test_no_completed_runs_is_an_error(tmp_path: Path) -> None:
    configs = cpu_parallel_configs()[:1]
    configs[0].rates = [None, None]
    store = build_store(tmp_path / "failed.db", configs)
    with pytest.raises(ReportError, match="no completed runs.*worker 1 exited"):
        load_report_data(store, sweep_id=SWEEP)


# -- files --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("report")
    store = build_store(root / "runs.db", cpu_parallel_configs())
    return build_report(store, sweep_id=SWEEP, out_dir=root / "out" / "nested")


def test_write_report_files(written) -> None:
    out = written.html.parent
    names = sorted(p.name for p in out.iterdir())
    assert {"report.html", "report.md", "report.csv"} <= set(names)
    assert not [n for n in names if n.endswith(".tmp")]  # atomic writes leave no temp files
    kinds = {(p.name.split("-")[0]) for p in written.plots}
    assert {"throughput", "speedup", "efficiency", "accuracy", "time", "breakdown"} <= kinds


def test_plots_are_real_pngs(written) -> None:
    from matplotlib.image import imread

    assert len(written.plots) >= 6
    for path in written.plots:
        content = path.read_bytes()
        assert content.startswith(PNG_SIGNATURE), path
        assert len(content) > 5_000, path  # a drawn chart, not an empty canvas
        pixels = imread(path)
        assert pixels.shape[0] > 200 and pixels.shape[1] > 400
        assert pixels.std() > 0.01  # not a blank image


def test_html_is_self_contained(written) -> None:
    page = written.html.read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page
    # Every src/href is an embedded data URI (no protocol-relative //host/x.png either).
    references = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page)
    assert references and all(ref.startswith("data:") for ref in references)
    assert "url(" not in page  # no CSS that loads anything
    assert "<script" not in page and "<link" not in page
    sources = re.findall(r'<img src="([^"]+)"', page)
    assert len(sources) == len(written.plots)
    assert all(src.startswith("data:image/png;base64,") for src in sources)
    assert "Content-Security-Policy" in page


def test_html_and_markdown_name_baseline_machine_and_notes(written) -> None:
    page = written.html.read_text(encoding="utf-8")
    markdown = written.markdown.read_text(encoding="utf-8")
    for text in (page, markdown):
        assert "Test CPU 9000" in text and "2.13.0+cpu" in text
        assert "&#x27;cnn serial 1 core&#x27;" in text or "'cnn serial 1 core'" in text
        assert "synthetic data" in text
        assert "noisy" in text
        assert "% gain vs slowest" in text
        assert "oversubscribed: 16 threads on 4 cores" in text
        assert "S(n) = 1 / (s + (1 - s) / n)" in text
        assert "worker 1 exited with code 1" in text  # the failed run and its reason
        assert "Step-time breakdown: mnist-cnn" in text  # recorded for one mnist setting
        assert "Step-time breakdown: no run recorded a step-time breakdown" in text  # text
        # tweets-text's affinity sets use 1 and 2 cores of 1 worker: plotted against cores.
        assert "Speedup vs cores: tweets-text" in text
    # Markdown links the PNGs that sit beside it.
    for path in written.plots:
        assert f"]({path.name})" in markdown


def test_same_figures_in_markdown_html_and_csv(written) -> None:
    markdown = written.markdown.read_text(encoding="utf-8")
    page = written.html.read_text(encoding="utf-8")
    for cell in ("305.0", "3.05x", "76%", "31.0 (2/3)", "0.9750"):
        assert cell in markdown and cell in page
    rows = list(csv.DictReader(io.StringIO(written.csv.read_text(encoding="utf-8"))))
    assert tuple(rows[0]) == CSV_COLUMNS
    pinned = next(r for r in rows if r["configuration"] == "cnn 4 pinned workers x 1 thread")
    assert float(pinned["speedup"]) == pytest.approx(3.05)
    assert pinned["failed_runs"] == "1"
    text = next(r for r in rows if r["configuration"] == "text affinity set 1 core(s)")
    assert text["test_accuracy"] == "" and text["time_to_target_s"] == ""
    assert text["baseline"] == "True"


def test_write_report_returns_html_and_rewrites_in_place(cpu_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = write_report(cpu_store, sweep_id=SWEEP, out_dir=out)
    second = write_report(
        cpu_store, sweep_id=SWEEP, out_dir=out, baseline="cnn 1 process x 4 threads"
    )
    assert first == second == out / "report.html"
    assert "chosen with --baseline" in second.read_text(encoding="utf-8")


def test_unwritable_out_dir(cpu_store: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ReportError, match="cannot"):
        write_report(cpu_store, sweep_id=SWEEP, out_dir=blocker)
    with pytest.raises(ReportError, match="cannot create report directory"):
        write_report(cpu_store, sweep_id=SWEEP, out_dir=blocker / "sub")


def test_plots_do_not_touch_pyplot_state(cpu_report: ReportData) -> None:
    import sys

    render_plots(cpu_report)
    if "matplotlib.pyplot" in sys.modules:  # another test imported it: no figure of ours there
        import matplotlib.pyplot as plt

        assert plt.get_fignums() == []


# -- readable tables and plots ----------------------------------------------------------------


def _markdown_tables(markdown: str, workload: str) -> list[list[str]]:
    """The tables of one workload's section, each as its lines."""
    section = markdown.split(f"## {workload}\n", 1)[1].split("\n## ", 1)[0]
    tables, current = [], []
    for line in section.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_the_main_table_fits_a_laptop_and_the_details_table_holds_the_rest(written) -> None:
    markdown = written.markdown.read_text(encoding="utf-8")
    core, *_ = _markdown_tables(markdown, "mnist-cnn")
    after = markdown.split("## mnist-cnn\n", 1)[1].split("### Details\n", 1)[1]
    details = after.lstrip("\n").split("\n\n", 1)[0].splitlines()
    assert core[0] == (
        "| configuration | w x t (cores) | samples/s | speedup | eff./core | accuracy "
        "| to target (s) |"
    )
    assert len(core[0]) <= 100
    for row in core[2:]:
        label = row.split(" | ", 1)[0]
        # The figures take 75 columns at most (the longest: "4 x 4 (torch default) (4)"), so
        # a row with a label of 25 characters fits in 100.
        assert len(row) - len(label) <= 75, row
    for moved in ("peak MiB / worker", "cost ($)", "step ms (median, IQR)", "notes", "data"):
        assert moved not in core[0] and moved in details[0]
    assert len(details) == len(core)  # one row per configuration in each
    assert "| cnn 4 pinned workers x 1 thread | 4 x 1 (4) | 305.0 | 3.05x |" in markdown
    page = written.html.read_text(encoding="utf-8")
    main, rest = page.split("<h2>mnist-cnn</h2>", 1)[1].split("<h3>Details</h3>", 1)
    assert "<th>eff./core</th>" in main and "peak MiB / worker" not in main
    assert "<th>peak MiB / worker</th>" in rest.split("</table>", 1)[0]


@pytest.mark.parametrize(
    ("dollars", "text"),
    [
        (0.0123, "0.0123"),
        (0.1, "0.1"),
        (0.000012345, "0.0000123"),
        (1.2e-9, "0.0000000012"),
        (12.5, "12.50"),
        (123456.789, "123456.79"),
        (0.0, "0"),
        (None, "-"),
    ],
)
def test_costs_are_fixed_point(dollars, text) -> None:
    from trainscale.reporting.tables import money

    assert money(dollars) == text


def _legend(figure) -> list[str]:
    legends = [axes.get_legend() for axes in figure.axes] + list(figure.legends)
    return [t.get_text() for legend in legends if legend for t in legend.get_texts()]


def test_plot_legends_name_configurations_by_their_labels(cpu_report: ReportData) -> None:
    from trainscale.reporting.plots import draw_figure

    mnist = cpu_report.workloads[0]
    for kind in ("throughput", "speedup", "efficiency", "accuracy"):
        figure, _ = draw_figure(kind, mnist)
        texts = _legend(figure)
        assert any("cnn 1 process x 4 threads" in t for t in texts), (kind, texts)
        drawn = [t for t in texts if not t.startswith(("ideal", "Amdahl", "noisy", "target"))]
        assert not any(re.search(r"[0-9a-f]{8}|=", t) for t in drawn), (kind, texts)
    figure, _ = draw_figure("speedup", mnist)
    # The serial run and the pinned workers are one line: same threads, more workers.
    assert "cnn serial 1 core / cnn 4 pinned workers x 1 thread" in _legend(figure)
    assert "cnn naive DDP: 4 unpinned workers, torch-default threads" in _legend(figure)


def test_legends_of_labels_that_differ_at_their_end_stay_apart(cpu_report: ReportData) -> None:
    """Labels made of the settings that differ often differ only at their end: a legend
    cut at the end would name two series alike."""
    import dataclasses

    from trainscale.reporting.plots import series_legend

    config = cpu_report.workloads[0].configurations[0]
    start = "workers=1, threads_per_worker=1, precision=bf16, batch_size="
    one, two = (dataclasses.replace(config, label=f"{start}{b}") for b in (64, 128))
    assert series_legend([one]) != series_legend([two])
    assert series_legend([one]).endswith("batch_size=64")
    assert series_legend([one, two]).endswith("batch_size=128")
    assert series_legend([two, one]) != series_legend([one, two])


def test_the_ideal_line_is_drawn_against_cores_and_only_there(cpu_report: ReportData) -> None:
    from trainscale.reporting.plots import IDEAL_LABEL, draw_figure

    mnist = cpu_report.workloads[0]
    for kind in ("throughput", "speedup"):
        figure, _ = draw_figure(kind, mnist)
        axes = figure.axes[0]
        assert axes.get_xlabel().startswith("cores")
        lines = {line.get_label(): line for line in axes.get_lines()}
        ideal = lines[IDEAL_LABEL]
        assert list(ideal.get_xdata()) == [1, 2, 3, 4]
        # 1 process x 4 threads uses 4 cores, as 4 workers x 1 thread do: both at x = 4
        # (throughput draws error bars: a container per series, its line inside).
        series = {c.get_label(): c[0] for c in axes.containers} if kind == "throughput" else lines
        assert list(series["cnn 1 process x 4 threads"].get_xdata()) == [4]
        pinned = series["cnn serial 1 core / cnn 4 pinned workers x 1 thread"]
        assert list(pinned.get_xdata()) == [1, 4]
        if kind == "speedup":
            assert list(ideal.get_ydata()) == [1.0, 2.0, 3.0, 4.0]
    # Accuracy is plotted against time, not a resource: no ideal line there.
    figure, _ = draw_figure("accuracy", mnist)
    assert not any("ideal" in text for text in _legend(figure))
    assert not any(line.get_label().startswith("ideal") for line in figure.axes[0].get_lines())


def test_why_a_precision_was_chosen_does_not_name_a_configuration() -> None:
    fp32 = {"workers": 2, "precision": "fp32", "precision_reason": "--precision fp32"}
    bf16 = {"workers": 2, "precision": "bf16", "precision_reason": "--precision bf16"}
    assert labels_from_differences({"a": fp32, "b": bf16}) == {
        "a": "precision=fp32",
        "b": "precision=bf16",
    }


def test_the_breakdown_plot_names_its_parts_in_words(cpu_report: ReportData) -> None:
    from trainscale.reporting import plots

    section = next(s for s in cpu_report.workloads if any(c.breakdown_s for c in s.configurations))
    figure, _ = plots._breakdown(section)
    shown = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    assert shown == ["data", "forward", "backward compute", "optimizer", "exposed communication"]


def test_the_breakdown_bars_add_up_to_the_step_with_no_part_counted_twice(
    cpu_report: ReportData,
) -> None:
    """The stored backward holds the exposed communication: stacking both would draw a
    multi-worker step longer than it is."""
    from trainscale.reporting import plots

    section = next(s for s in cpu_report.workloads if any(c.breakdown_s for c in s.configurations))
    figure, _ = plots._breakdown(section)
    bars = figure.axes[0].patches
    configs = [c for c in section.configurations if c.breakdown_s]
    for index, config in enumerate(configs):
        drawn = sum(bar.get_width() for bar in bars[index :: len(configs)])
        parts = config.breakdown_s or {}
        step = sum(parts.get(p, 0.0) for p in ("data", "forward", "backward", "optimizer"))
        assert drawn == pytest.approx(1000 * step)
    assert any((c.breakdown_s or {}).get("exposed_comm") for c in configs)  # it is tested


def test_two_scripts_of_one_file_name_in_two_folders_are_two_sections(tmp_path: Path) -> None:
    def script(path: str, rate: float, batch: int) -> FixtureConfig:
        return FixtureConfig(
            label=path,
            workload="script:train.py",
            workers=1,
            threads=1,
            affinity="compact",
            rates=[rate],
            data="synthetic",
            global_batch_size=batch,
            extra_config={"script": path, "script_args": []},
        )

    store = build_store(
        tmp_path / "scripts.db",
        [script("/home/a/proj2/train.py", 100.0, 64), script("/home/a/other/train.py", 51.0, 8)],
    )
    data = load_report_data(store, sweep_id=SWEEP)
    names = [section.workload for section in data.workloads]
    assert names == [
        "script:train.py (/home/a/proj2/train.py)",
        "script:train.py (/home/a/other/train.py)",
    ]
    # Each is its own baseline: neither is the other's "speedup".
    assert all(s.baseline is not None and len(s.configurations) == 1 for s in data.workloads)
    assert all(c.speedup in (None, 1.0) for s in data.workloads for c in s.configurations)


def test_runs_of_two_workloads_are_named_by_what_differs_within_each(tmp_path: Path) -> None:
    # Named across workloads, every setting differs (the workload, its recipe, its data),
    # so each label listed all of them and a plot's legend cut them to one text.
    def config(label: str, workload: str, workers: int) -> FixtureConfig:
        return FixtureConfig(label, workload, workers, 1, "compact", [100.0 * workers], "synthetic")

    configs = [config("a", "mnist-cnn", 1), config("b", "mnist-cnn", 2)]
    configs += [config("c", "tweets-text", 1), config("d", "tweets-text", 2)]
    store = build_store(tmp_path / "two.db", configs, sweep_id=None)
    with RunStore(store) as opened:
        run_ids = [r.run_id for r in opened.list_runs()]
    data = load_report_data(store, run_ids=run_ids)
    for section in data.workloads:
        labels = sorted(c.label for c in section.configurations)
        assert labels == ["workers=1", "workers=2"] or all(
            label.startswith(("workers=1 [", "workers=2 [")) for label in labels
        ), labels
        assert not any("workload=" in label for label in labels)
    all_labels = [c.label for s in data.workloads for c in s.configurations]
    assert len(set(all_labels)) == 4  # still one name per configuration (--baseline)


def test_a_long_label_is_on_one_line_and_inside_the_saved_image(cpu_report: ReportData) -> None:
    import dataclasses
    import io

    from matplotlib.image import imread

    from trainscale.reporting.plots import draw_figure, png_bytes, series_legend

    mnist = cpu_report.workloads[0]
    config = dataclasses.replace(mnist.configurations[0], label="-2 workers\nsecond line")
    assert "\n" not in series_legend([config])  # folded, as the tables fold it
    long = "a baseline named at great length, " * 3
    base = dataclasses.replace(mnist.baseline, label=long)
    figure, _ = draw_figure("speedup", dataclasses.replace(mnist, baseline=base))
    pixels = imread(io.BytesIO(png_bytes(figure)))
    figure.canvas.draw()
    label = figure.axes[0].yaxis.label.get_window_extent()
    # The whole y label (its cut text) is within the saved image, not cut at its edge.
    assert label.height <= pixels.shape[0] and label.width <= pixels.shape[1]
    assert figure.get_tightbbox().height * figure.dpi <= pixels.shape[0] + 2


def test_a_report_made_again_into_its_directory_leaves_no_plot_of_the_last(
    cpu_store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    write_report(cpu_store, sweep_id=SWEEP, out_dir=out)
    (out / "accuracy-old-workload.png").write_bytes(b"an earlier report's plot")
    (out / "my-notes.png").write_bytes(b"the user's own file")
    write_report(cpu_store, sweep_id=SWEEP, out_dir=out)
    assert not (out / "accuracy-old-workload.png").exists()
    assert (out / "my-notes.png").exists()  # not one of the report's plots: kept
    markdown = (out / "report.md").read_text()
    for plot in out.glob("*.png"):
        assert plot.name == "my-notes.png" or plot.name in markdown
