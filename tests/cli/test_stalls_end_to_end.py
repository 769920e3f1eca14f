"""A run that stalls, end to end through the CLI: a two-configuration sweep of tiny synthetic
mnist-cnn runs, the longer of which sleeps on an injected stall. The sweep table, the
report and `trainscale compare SWEEP:LABEL` flag it with the same words (the mean step beside
the median), and compare's throughput ratio is the report's."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from trainscale.metrics.run_flags import has_stalls, stalls_note
from trainscale.results.store import RunStore

from tests.helpers.cli import run_cli

# Two configurations that differ only in their length: the stall at step 12 happens in the
# 14-step one only. 13 timed steps of a few ms with one 0.6 s sleep put its mean far above
# its median on any machine.
SPEC = """
name = "stall-check"
repeats = 1
[base]
workload = "mnist-cnn"
data = "synthetic"
evaluate = false
batch_size = 8
threads_per_worker = 1
warmup_steps = 1
[grid]
steps = [8, 14]
"""
STALL = "stall:rank=0:step=12:seconds=0.6"


@pytest.fixture(scope="module")
def stalled_sweep(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Runs the sweep once (with the stall injected) and its report; what the tests read."""
    tmp = tmp_path_factory.mktemp("stalls")
    spec, store, out = tmp / "s.toml", tmp / "s.db", tmp / "report"
    spec.write_text(SPEC)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRAINSCALE_FAULT_INJECT", STALL)
        patch.setenv("COLUMNS", "300")  # one line per table row, so the note reads whole
        capture = _Capture()
        with capture:
            assert run_cli(["sweep", str(spec), "--store", str(store)]) == 0
    with RunStore(store) as opened:
        (sweep,) = opened.list_sweeps()
        runs = {r.config_hash: r for r in opened.sweep_runs(sweep.sweep_id)}
    labels = {entry["label"]: runs[entry["config_hash"]] for entry in sweep.plan}
    report = ["report", "--sweep", sweep.sweep_id, "--out", str(out), "--store", str(store)]
    assert run_cli(report) == 0
    return {
        "store": store,
        "sweep": sweep,
        "labels": labels,
        "sweep_output": capture.text,
        "report_rows": {row["configuration"]: row for row in _csv(out / "report.csv")},
        "report_md": (out / "report.md").read_text(),
    }


class _Capture:
    """stdout of an in-process command, without capsys (a module-scoped fixture has none)."""

    def __enter__(self) -> None:
        import contextlib
        import io

        self._buffer = io.StringIO()
        self._redirect = contextlib.redirect_stdout(self._buffer)
        self._redirect.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._redirect.__exit__(*exc)
        self.text = self._buffer.getvalue()


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables one line per row, so that a note reads whole."""
    monkeypatch.setenv("COLUMNS", "300")


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_stalled_run_is_flagged_in_its_summary(stalled_sweep: dict) -> None:
    long_run = stalled_sweep["labels"]["steps=14"]
    summary = long_run.summary
    assert has_stalls(summary)
    # The headline is the median's; the stall shows in the mean only.
    assert summary["samples_per_s"] == pytest.approx(8 / summary["step_time_s_median"])
    assert summary["step_time_s_mean"] > summary["step_time_s_median"] + 0.6 / 13 * 0.9


def test_sweep_table_report_and_compare_flag_it_the_same_way(stalled_sweep, capsys) -> None:
    sweep, labels = stalled_sweep["sweep"], stalled_sweep["labels"]
    note = stalls_note([labels["steps=14"].summary])
    assert note is not None and note.startswith("stalls: mean step ")
    # The sweep's own table, as the command printed it.
    assert note in stalled_sweep["sweep_output"]
    # The report: the configuration's notes, in the CSV and the Markdown.
    rows = stalled_sweep["report_rows"]
    assert note in rows["steps=14"]["notes"]
    assert note in stalled_sweep["report_md"]
    # compare, one configuration of the sweep on each side.
    short = sweep.sweep_id[:8]
    assert run_cli(["compare", f"{short}:steps=8", f"{short}:steps=14", "--json",
                    "--resamples", "200", "--store", str(stalled_sweep["store"])]) == 0  # fmt: skip
    (row,) = json.loads(capsys.readouterr().out)["comparisons"]
    assert row["b_stalls"] == note
    assert any(note in warning for warning in row["warnings"])
    # The clean side is judged by the same rule, whatever this machine's noise did to it.
    assert (row["a_stalls"] is not None) == has_stalls(labels["steps=8"].summary)
    # And the text table says so, with the figures.
    assert run_cli(["compare", f"{short}:steps=8", f"{short}:steps=14", "--resamples", "200",
                    "--store", str(stalled_sweep["store"])]) == 0  # fmt: skip
    text = " ".join(capsys.readouterr().out.split())
    assert note in text


def test_compare_gives_the_report_s_throughput_ratio(stalled_sweep, capsys) -> None:
    rows, sweep = stalled_sweep["report_rows"], stalled_sweep["sweep"]
    assert run_cli(["compare", f"{sweep.name}:steps=8", f"{sweep.sweep_id}:steps=14", "--json",
                    "--resamples", "200", "--store", str(stalled_sweep["store"])]) == 0  # fmt: skip
    (row,) = json.loads(capsys.readouterr().out)["comparisons"]
    report_ratio = float(rows["steps=14"]["samples_per_s_median"]) / float(
        rows["steps=8"]["samples_per_s_median"]
    )
    assert row["throughput_ratio"] == pytest.approx(report_ratio, rel=1e-9)
    assert row["a"]["median_step_s"] * 1000 == pytest.approx(
        float(rows["steps=8"]["step_time_ms_median"]), rel=1e-9
    )


def test_runs_list_shows_the_stall(stalled_sweep, capsys) -> None:
    note = stalls_note([stalled_sweep["labels"]["steps=14"].summary])
    single = note.split(" in 1 of 1 run")[0]
    assert run_cli(["runs", "list", "--store", str(stalled_sweep["store"])]) == 0
    assert single in " ".join(capsys.readouterr().out.split())
